// What the sidecar says about its engine, from the registry and the engine: the version-4 hello (task,
// outputs, precision, precisions, host_cores) and the infer reply that must match it, `--list-engines`, and
// the refusal of a precision the engine lacks before any weights are read.
#include "sidecar-harness.h"

#include "engines/tt/openblas-core.h"

namespace {

using namespace rfdetr_test;

std::vector<std::string> output_names(const message & m) {
    std::vector<std::string> names;
    for (const auto & o : m.output_specs) names.push_back(o.name);
    return names;
}

TEST_F(sidecar, hello_declares_the_engine_facts_and_every_reply_carries_exactly_its_outputs) {
    sidecar_proc p;
    start(p);
    client  c;
    message hello;
    ASSERT_TRUE(c.open(socket_, &hello));
    EXPECT_EQ(hello.protocol_version, 4u);
    EXPECT_EQ(hello.task, "detect");
    ASSERT_EQ(hello.output_specs.size(), 2u);
    EXPECT_EQ(output_names(hello), (std::vector<std::string>{"logits", "pred_boxes"}));
    EXPECT_EQ(hello.output_specs[0].dtype, "f32");
    EXPECT_EQ(hello.output_specs[0].shape, (std::vector<uint64_t>{300, 91}));
    EXPECT_EQ(hello.output_specs[1].dtype, "f32");
    EXPECT_EQ(hello.output_specs[1].shape, (std::vector<uint64_t>{300, 4}));
    EXPECT_EQ(hello.precision, "fp32");
    EXPECT_EQ(hello.precisions, std::vector<std::string>{"fp32"});
    EXPECT_TRUE(hello.host_cores);

    // The reply, from pixel_values and from an image: the hello's names in its order, product(shape) f32 each.
    for (const bool pixels : {true, false}) {
        const uint64_t id = pixels ? 3 : 4;
        c.send_msg(pixels ? make_infer(id, ramp_pixels()) : make_image_infer(id, 64, 48, noise_rgb(64, 48, 7)));
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s));
        ASSERT_TRUE(r.ok) << r.error_message;
        EXPECT_TRUE(r.has(rfdetr::WIRE_FIELD_OUTPUTS));
        EXPECT_FALSE(r.has(rfdetr::WIRE_FIELD_V3_LOGITS) || r.has(rfdetr::WIRE_FIELD_V3_PRED_BOXES));
        ASSERT_EQ(r.outputs.size(), hello.output_specs.size());
        for (size_t i = 0; i < r.outputs.size(); i++) {
            const auto & spec = hello.output_specs[i];
            EXPECT_EQ(r.outputs[i].name, spec.name) << "output " << i;
            EXPECT_EQ(r.outputs[i].data.size, spec.shape[0] * spec.shape[1] * 4u) << spec.name;
        }
    }
}

TEST_F(sidecar, hello_says_an_accelerator_like_engine_does_not_run_on_host_cores) {
    sidecar_proc p;
    start(p, {"RFDETR_TEST_FORWARD_MS=0"}, {"--precision", "fp32"}, "test-sleep");
    client  c;
    message hello;
    ASSERT_TRUE(c.open(socket_, &hello));
    EXPECT_EQ(hello.engine, "test-sleep");
    EXPECT_FALSE(hello.host_cores);
    EXPECT_EQ(hello.precision, "fp32");
    EXPECT_EQ(hello.precisions, std::vector<std::string>{"fp32"});
}

TEST_F(sidecar, list_engines_prints_every_engine_with_its_precisions_and_host_cores) {
    sidecar_proc p;
    p.spawn({"--list-engines"});
    EXPECT_EQ(p.wait_exit(), 0);
    p.wait_ready(500);
    // Keys in the documented order, facts from the registry (PROTOCOL.md, "--list-engines").
    EXPECT_NE(p.out_text.find(R"({"name":"cpu","built":true,"precisions":["fp32","int8","bf16"],"default_precision":"fp32",)"
                              R"("host_cores":true})"),
              std::string::npos)
        << p.out_text;
    EXPECT_NE(p.out_text.find(R"({"name":"tt-host","built":true,"precisions":["fp32","bf16"],)"
                              R"("default_precision":"fp32","host_cores":true})"),
              std::string::npos)
        << p.out_text;
    EXPECT_NE(p.out_text.find(R"({"name":"test-sleep","built":true,"precisions":["fp32"],"default_precision":"fp32",)"
                              R"("host_cores":false})"),
              std::string::npos)
        << p.out_text;
    const json j = json::parse(p.out_text);
    std::vector<std::string> names;
    for (const auto & e : j.at("engines")) {
        names.push_back(e.at("name"));
        if (e.at("name") == "tt") {
            EXPECT_EQ(e.at("precisions"), json::array({"bf16"}));
            EXPECT_EQ(e.at("default_precision"), "bf16");
            EXPECT_EQ(e.at("host_cores"), false);
            EXPECT_EQ(e.contains("unbuilt_reason"), !e.at("built").get<bool>()) << e.dump();
        }
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"cpu", "test-echo", "test-sleep", "tt", "tt-host"}));
}

// tt-host's matmuls are OpenBLAS's, and OpenBLAS picks its kernels when it is loaded: on a CPU it does not know it
// picks generic ones (Debian's 0.3.21: "Prescott", SSE3, on a Xeon of CPUID model 207). The sidecar restarts itself
// once with OPENBLAS_CORETYPE naming the CPU's own (openblas-core.h), before anything else (here the missing weights
// still end it with exit 1 afterwards), and leaves an OPENBLAS_CORETYPE the operator set alone. Runs where this
// machine's OpenBLAS chose a generic core on a CPU with AVX2 or AVX-512; a skip, with the core, where it did not.
TEST_F(sidecar, tt_host_restarts_once_with_the_cpus_own_openblas_kernels_where_openblas_chose_generic_ones) {
    const char * chosen = rfdetr::openblas_core();
    const char * better = rfdetr::openblas_core_upgrade(chosen, rfdetr::cpu_vector_units_here());
    if (!better) {
        GTEST_SKIP() << "OpenBLAS chose its " << chosen << " kernels on this CPU, matched to it: nothing to restart for";
    }
    const std::vector<std::string> args = {"--socket", socket_, "--weights", dir_ + "/missing", "--engine", "tt-host"};
    const std::string restarting = std::string("chose its generic ") + chosen +
                                   " kernels for tt-host's matmuls; restarting with OPENBLAS_CORETYPE=" + better;
    const std::string restarted = std::string("restarted: OpenBLAS runs its ") + better + " kernels (it had chosen " +
                                  chosen + ")";
    auto count = [](const std::string & text, const std::string & needle) {
        int n = 0;
        for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
        return n;
    };
    {
        sidecar_proc p;
        p.spawn(args);
        EXPECT_EQ(p.wait_exit(), 1) << p.err_text;
        EXPECT_EQ(count(p.err_text, restarting), 1) << p.err_text;
        EXPECT_EQ(count(p.err_text, restarted), 1) << p.err_text;
        EXPECT_NE(p.err_text.find("weights"), std::string::npos) << "the restarted process went on to load\n"
                                                                 << p.err_text;
    }
    {
        sidecar_proc p;
        p.spawn(args, {std::string("OPENBLAS_CORETYPE=") + chosen});
        EXPECT_EQ(p.wait_exit(), 1) << p.err_text;
        EXPECT_EQ(p.err_text.find("restart"), std::string::npos) << "the operator's OPENBLAS_CORETYPE stands\n"
                                                                 << p.err_text;
    }
    {
        sidecar_proc p;  // the cpu engine does not use OpenBLAS: no restart
        p.spawn({"--socket", socket_, "--weights", dir_ + "/missing", "--engine", "cpu"});
        EXPECT_EQ(p.wait_exit(), 1) << p.err_text;
        EXPECT_EQ(p.err_text.find("restart"), std::string::npos) << p.err_text;
    }
}

TEST_F(sidecar, a_precision_the_engine_lacks_exits_2_before_loading_naming_its_precisions) {
    struct refusal {
        std::vector<std::string> args;
        std::string              needle;
    };
    // RFDETR_TEST_ECHO_LOAD_FAIL and a missing weights directory make any load fail with exit 1: exit 2 and
    // the precision sentence show the refusal came first.
    const std::vector<refusal> cases = {
        {{"--engine", "test-echo", "--precision", "int8"},
         "engine 'test-echo' cannot run --precision 'int8'; it runs fp32 (default fp32)"},
        {{"--engine", "tt-host", "--precision", "int8"},
         "engine 'tt-host' cannot run --precision 'int8'; it runs fp32, bf16 (default fp32)"},
        {{"--engine", "tt", "--precision", "fp32"},
         "engine 'tt' cannot run --precision 'fp32'; it runs bf16 (default bf16)"},
        {{"--engine", "cpu", "--precision", "fp16"},
         "engine 'cpu' cannot run --precision 'fp16'; it runs fp32, int8, bf16 (default fp32)"},
    };
    for (const auto & rc : cases) {
        std::vector<std::string> args = {"--socket", socket_, "--weights", dir_ + "/missing"};
        args.insert(args.end(), rc.args.begin(), rc.args.end());
        sidecar_proc p;
        p.spawn(args, {"RFDETR_TEST_ECHO_LOAD_FAIL=1"});
        EXPECT_EQ(p.wait_exit(), 2) << rc.needle << "\n" << p.err_text;
        EXPECT_NE(p.err_text.find(rc.needle), std::string::npos) << p.err_text;
        EXPECT_EQ(p.err_text.find("failed to start"), std::string::npos) << p.err_text;
        EXPECT_FALSE(file_exists(socket_)) << "a refused precision opens no socket";
    }
}

// The cpu engine lists bf16, but a CPU (here: a kernel level, RFDETR_CPU_ISA=avx2) without bf16 instructions
// refuses it as a usage error before loading, naming what is missing and what runs. On a CPU with bf16 the
// message names the level that excludes it ("... or run fp32 or int8"); on one without (Zen 3) it says the CPU
// lacks them ("the cpu engine here runs fp32, int8").
TEST_F(sidecar, cpu_bf16_without_bf16_kernels_exits_2_before_loading) {
    sidecar_proc p;
    p.spawn({"--socket", socket_, "--weights", dir_ + "/missing", "--engine", "cpu", "--precision", "bf16"},
            {"RFDETR_CPU_ISA=avx2"});
    EXPECT_EQ(p.wait_exit(), 2) << p.err_text;
    EXPECT_NE(p.err_text.find("--precision bf16 needs AVX512-BF16 or AMX-BF16"), std::string::npos) << p.err_text;
    EXPECT_TRUE(p.err_text.find("run fp32 or int8") != std::string::npos ||
                p.err_text.find("the cpu engine here runs fp32, int8") != std::string::npos)
        << "the refusal names what runs: " << p.err_text;
    EXPECT_EQ(p.err_text.find("failed to start"), std::string::npos) << p.err_text;
    EXPECT_FALSE(file_exists(socket_)) << "a refused precision opens no socket";
}

}  // namespace
