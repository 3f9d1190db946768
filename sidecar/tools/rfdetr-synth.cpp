// rfdetr-synth --seed N --out DIR [--variant V] [--num-classes C] [--quiet]
// Writes a synthetic RF-DETR checkpoint of variant V (rfdetr-synth SPEC v1 + the rule table of the variant's schema):
// DIR/model.safetensors + DIR/config.json.
// Exit codes: 0 written, 1 write failed, 2 usage error (the message names the flag).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/error.h"
#include "model/schema.h"
#include "model/synth.h"

namespace {

constexpr const char * k_usage =
    "usage: rfdetr-synth --seed N --out DIR [--variant V] [--num-classes C] [--quiet]\n"
    "  --seed N         generator seed, decimal or 0x-hex, up to 64 bits (required)\n"
    "  --out DIR        output directory (created); writes DIR/model.safetensors and DIR/config.json\n"
    "  --variant V      base (default), nano, small, medium, large, large_deprecated (detection);\n"
    "                   seg-nano, seg-small, seg-medium, seg-large, seg-xlarge, seg-2xlarge (RF-DETR Seg)\n"
    "  --num-classes C  class count (default 91, COCO); other values make a fine-tuned-shaped checkpoint\n"
    "  --quiet          only the SYNTHETIC warning on stderr\n";

int usage_error(const std::string & msg) {
    std::fprintf(stderr, "rfdetr-synth: %s\n%s", msg.c_str(), k_usage);
    return 2;
}

}  // namespace

int main(int argc, char ** argv) {
    rfdetr::synth_options opts;
    std::string           out;
    bool                  have_seed = false;
    bool                  quiet     = false;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::fputs(k_usage, stderr);
            return 0;
        }
        if (arg == "--quiet") {
            quiet = true;
            continue;
        }
        std::string value;
        std::string flag = arg;
        const size_t eq  = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            flag  = arg.substr(0, eq);
            value = arg.substr(eq + 1);
        } else if (arg == "--seed" || arg == "--out" || arg == "--num-classes" || arg == "--variant") {
            if (i + 1 >= argc) {
                return usage_error(arg + " needs a value");
            }
            value = argv[++i];
        }
        if (flag == "--seed") {
            if (!rfdetr::synth_parse_u64(value, opts.seed)) {
                return usage_error("--seed: expected a decimal or 0x-hex integer of at most 64 bits, got '" + value + "'");
            }
            have_seed = true;
        } else if (flag == "--out") {
            if (value.empty()) {
                return usage_error("--out: expected a directory, got ''");
            }
            out = value;
        } else if (flag == "--variant") {
            try {
                rfdetr::schema_get(value);
            } catch (const rfdetr::error &) {
                return usage_error("--variant: expected one of " + rfdetr::schema_variant_names() + ", got '" + value + "'");
            }
            opts.variant = value;
        } else if (flag == "--num-classes") {
            uint64_t n = 0;
            if (!rfdetr::synth_parse_u64(value, n) || n < 1 || n > 100000) {
                return usage_error("--num-classes: expected an integer in 1..100000, got '" + value + "'");
            }
            opts.num_classes = static_cast<int>(n);
        } else {
            return usage_error("unknown argument '" + arg + "'");
        }
    }
    if (!have_seed) {
        return usage_error("--seed is required");
    }
    if (out.empty()) {
        return usage_error("--out is required");
    }
    std::fprintf(stderr,
                 "rfdetr-synth: WARNING: these are SYNTHETIC weights (random values, seed %s): detections made with "
                 "them are MEANINGLESS. Use them for tests and benchmarks only.\n",
                 rfdetr::synth_seed_hex(opts.seed).c_str());
    const auto t0 = std::chrono::steady_clock::now();
    try {
        rfdetr::synth_write(out, opts);
    } catch (const rfdetr::error & e) {
        std::fprintf(stderr, "rfdetr-synth: %s\n", e.what());
        return 1;
    }
    if (!quiet) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "rfdetr-synth: wrote %s/model.safetensors and %s/config.json (%s, %d classes) in %.0f ms\n",
                     out.c_str(), out.c_str(), rfdetr::schema_get(opts.variant).model.c_str(), opts.num_classes, ms);
    }
    return 0;
}
