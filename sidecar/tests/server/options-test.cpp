// options_parse: flags beat environment variables beat defaults; errors name the flag and the value.
#include "server/options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

std::map<std::string, std::string> g_env;
const char * fake_env(const char * name) {
    auto it = g_env.find(name);
    return it == g_env.end() ? nullptr : it->second.c_str();
}

rfdetr::options_status parse(std::vector<const char *> args, rfdetr::sidecar_options & o, std::string & err) {
    args.insert(args.begin(), "rfdetr-sidecar");
    return rfdetr::options_parse(static_cast<int>(args.size()), args.data(), fake_env, o, err);
}

TEST(options, env_fills_in_and_flags_win) {
    g_env = {{"RFDETR_SOCKET", "/env.sock"}, {"RFDETR_ENGINE", "tt"}, {"TT_RF_DETR_WEIGHTS", "/w"},
             {"RFDETR_THREADS", "3"}, {"TT_DEVICE_ID", "2"}};
    rfdetr::sidecar_options o;
    std::string             err;
    ASSERT_EQ(parse({}, o, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(o.socket_path, "/env.sock");
    EXPECT_EQ(o.engine, "tt");
    EXPECT_EQ(o.weights_dir, "/w");
    EXPECT_EQ(o.threads, 3);
    EXPECT_EQ(o.device_id, 2);
    EXPECT_FALSE(o.exit_with_parent);
    EXPECT_FALSE(o.eager);
    EXPECT_FALSE(o.own_process_group);

    rfdetr::sidecar_options f;
    ASSERT_EQ(parse({"--socket", "/flag.sock", "--engine=cpu", "--threads", "1", "--device-id=0", "--precision", "bf16",
                     "--exit-with-parent", "--eager", "--own-process-group"}, f, err),
              rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(f.socket_path, "/flag.sock");
    EXPECT_EQ(f.engine, "cpu");
    EXPECT_EQ(f.weights_dir, "/w");
    EXPECT_EQ(f.threads, 1);
    EXPECT_EQ(f.device_id, 0);
    EXPECT_EQ(f.precision, "bf16");
    EXPECT_TRUE(f.exit_with_parent);
    EXPECT_TRUE(f.eager);
    EXPECT_TRUE(f.own_process_group);
    rfdetr::sidecar_options q;
    ASSERT_EQ(parse({"--precision", "int8"}, q, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(q.precision, "int8");
    g_env.clear();
}

TEST(options, bad_values_name_the_flag_and_value) {
    g_env = {{"TT_RF_DETR_WEIGHTS", "/w"}};
    rfdetr::sidecar_options o;
    std::string             err;
    EXPECT_EQ(parse({"--threads", "1.5"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--threads '1.5'"), std::string::npos) << err;
    EXPECT_EQ(parse({"--threads", "99999"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_EQ(parse({"--exit-with-parent=yes"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--exit-with-parent takes no value"), std::string::npos) << err;
    EXPECT_EQ(parse({"--eager=1"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--eager takes no value"), std::string::npos) << err;
    EXPECT_EQ(parse({"--own-process-group=1"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--own-process-group takes no value"), std::string::npos) << err;
    EXPECT_EQ(parse({"--engine", ""}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_EQ(parse({"-x"}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("unknown flag '-x'"), std::string::npos) << err;
    EXPECT_EQ(parse({"--help"}, o, err), rfdetr::options_status::OPTIONS_HELP);
    EXPECT_EQ(parse({"--version"}, o, err), rfdetr::options_status::OPTIONS_VERSION);
    EXPECT_EQ(parse({"--list-engines"}, o, err), rfdetr::options_status::OPTIONS_LIST_ENGINES);
    g_env = {{"TT_RF_DETR_WEIGHTS", "/w"}, {"TT_DEVICE_ID", "gpu0"}};
    EXPECT_EQ(parse({}, o, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("TT_DEVICE_ID='gpu0'"), std::string::npos) << err;
    g_env.clear();
}

TEST(options, frame_timeout_defaults_to_30_s_and_takes_env_and_flag) {
    g_env = {{"TT_RF_DETR_WEIGHTS", "/w"}};
    rfdetr::sidecar_options d;
    std::string             err;
    ASSERT_EQ(parse({}, d, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(d.frame_timeout_ms, 30000);
    g_env["RFDETR_FRAME_TIMEOUT_MS"] = "1500";
    rfdetr::sidecar_options e;
    ASSERT_EQ(parse({}, e, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(e.frame_timeout_ms, 1500);
    rfdetr::sidecar_options f;
    ASSERT_EQ(parse({"--frame-timeout-ms=250"}, f, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(f.frame_timeout_ms, 250);
    rfdetr::sidecar_options b;
    EXPECT_EQ(parse({"--frame-timeout-ms", "0"}, b, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--frame-timeout-ms '0' is not a time in milliseconds from 1 to 3600000"), std::string::npos) << err;
    g_env.clear();
}

TEST(options, nice_defaults_to_0_takes_minus_20_to_0_env_and_flag) {
    g_env = {{"TT_RF_DETR_WEIGHTS", "/w"}};
    rfdetr::sidecar_options d;
    std::string             err;
    ASSERT_EQ(parse({}, d, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(d.nice, 0);
    g_env["RFDETR_NICE"] = "-3";
    rfdetr::sidecar_options e;
    ASSERT_EQ(parse({}, e, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(e.nice, -3);
    rfdetr::sidecar_options f;
    ASSERT_EQ(parse({"--nice", "-20"}, f, err), rfdetr::options_status::OPTIONS_OK) << err;
    EXPECT_EQ(f.nice, -20);
    rfdetr::sidecar_options b;
    EXPECT_EQ(parse({"--nice=5"}, b, err), rfdetr::options_status::OPTIONS_USAGE_ERROR);
    EXPECT_NE(err.find("--nice '5' is not a nice value from -20 (highest priority) to 0 (as started)"), std::string::npos) << err;
    g_env.clear();
}

}  // namespace
