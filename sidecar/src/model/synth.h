// rfdetr-synth SPEC v1 (../shared/fixtures/rfdetr-synth/SPEC.md) with the family rule table
// (../shared/fixtures/rfdetr-family/GENERATOR.md): a deterministic synthetic checkpoint of any RF-DETR variant.
// Element i of tensor KEY is f32(A + S * ((mix(k + (i+1)*GAMMA) >> 40) * 2^-23 - 1)) with k = seed ^
// fnv1a64(KEY), mix the splitmix64 finaliser; (A, S) per tensor come from the variant's embedded schema.
// The weights are random: detections from them are meaningless. They exist for tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rfdetr {

uint64_t synth_fnv1a64(const std::string & key);
uint64_t synth_mix(uint64_t z);

// Fills dst[0..n) with elements [first, first+n) of tensor `key` under `seed` and rule (a, s).
void synth_fill(float * dst, uint64_t seed, const std::string & key, size_t n, double a, double s, size_t first = 0);

struct synth_options {
    uint64_t    seed        = 1;
    int         num_classes = 91;      // class_embed rows; != 91 makes a fine-tuned-shaped checkpoint ("class_N" labels)
    std::string variant     = "base";  // schema_variant_names()
};

// Writes DIR/model.safetensors (keys sorted byte-wise, data in the same order, header padded to 8 with
// __metadata__ {format: pt, synthetic: true, seed: 0x.., variant}) and DIR/config.json (the COCO config with
// the variant's fields, or id2label "class_N" for another class count, plus "synthetic": true). DIR is created if needed. Each file is written
// under a temporary name and renamed into place (config.json first, model.safetensors last), so a reader
// never sees a half-written file and a failure leaves nothing behind. Throws rfdetr::error.
void synth_write(const std::string & dir, const synth_options & opts);

// The safetensors header synth_write writes (length prefix included), for tests.
std::string synth_header(const synth_options & opts);

// "0x1" (lower-case hex, no leading zeros): the form used in file and directory names.
std::string synth_seed_hex(uint64_t seed);

// Parses a seed: decimal or 0x-hex, up to 64 bits, nothing else (no sign, no spaces, no trailing text).
bool synth_parse_u64(const std::string & text, uint64_t & out);

}  // namespace rfdetr
