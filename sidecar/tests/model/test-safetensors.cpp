// The safetensors header validation: every malformed file is an rfdetr::error naming the file, never a crash.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "test-util.h"

using namespace rfdetr_test;

namespace {

const std::string k_file = "/weights/model.safetensors";

std::vector<uint8_t> small_file(std::vector<fake_tensor> ts = { { "a.w", { 2, 3 } }, { "b.b", { 3 } }, { "c", {} } }) {
    uint64_t          data = 0;
    const std::string h    = make_header(ts, &data);
    std::vector<uint8_t> out(h.begin(), h.end());
    for (uint64_t i = 0; i < data; i++) {
        out.push_back(static_cast<uint8_t>(i * 7));
    }
    return out;
}

std::vector<uint8_t> with_header_text(const std::string & json, uint64_t data_bytes) {
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; i++) {
        prefix[i] = static_cast<char>((uint64_t(json.size()) >> (8 * i)) & 0xff);
    }
    const std::string    all = prefix + json + std::string(data_bytes, '\0');
    return std::vector<uint8_t>(all.begin(), all.end());
}

// Expects rfdetr::error whose message names the file and contains every fragment.
void expect_error(const std::vector<uint8_t> & bytes, std::initializer_list<std::string> fragments,
                  size_t size = SIZE_MAX) {
    try {
        rfdetr::safetensors_parse(k_file, bytes.data(), std::min(size, bytes.size()));
        ADD_FAILURE() << "no error; expected one containing " << *fragments.begin();
    } catch (const rfdetr::error & e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(k_file + ": not a valid safetensors file"), std::string::npos) << msg;
        for (const auto & f : fragments) {
            EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
        }
    }
}

}  // namespace

TEST(Safetensors, ParsesAValidFile) {
    const auto           bytes = small_file();
    const rfdetr::st_header h  = rfdetr::safetensors_parse(k_file, bytes.data(), bytes.size());
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.tensors[0].name, "a.w");
    EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{ 2, 3 }));
    EXPECT_EQ(h.tensors[0].begin, 0u);
    EXPECT_EQ(h.tensors[0].end, 24u);
    EXPECT_EQ(h.tensors[2].name, "c");  // a scalar: shape [], one element
    EXPECT_EQ(h.tensors[2].end - h.tensors[2].begin, 4u);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ(h.data_offset % 8, 0u);
    EXPECT_EQ(h.data_offset + 40, bytes.size());
}

TEST(Safetensors, EmptyAndTinyFiles) {
    expect_error({}, { "0 bytes", "empty file" });
    expect_error({ 1, 2, 3 }, { "3 bytes", "shorter than the 8-byte header length" });
}

TEST(Safetensors, TruncatedAtEveryOffsetOfASmallFile) {
    const auto bytes = small_file();
    for (size_t n = 0; n < bytes.size(); n++) {
        SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(bytes.size()));
        expect_error(bytes, {}, n);
    }
}

TEST(Safetensors, TruncatedFullCheckpointAtManyOffsets) {
    // The real layout (487 tensors, ~45 kB header, 129 MB data) over zero data, cut at 400 offsets spread over
    // the header and the data.
    const std::string    h = rfdetr::synth_header({});
    uint64_t             data = 0;
    for (const auto & t : schema_tensors()) {
        data += static_cast<uint64_t>(numel(t.shape)) * 4;
    }
    std::vector<uint8_t> bytes(h.begin(), h.end());
    bytes.resize(h.size() + data);
    ASSERT_NO_THROW(rfdetr::safetensors_parse(k_file, bytes.data(), bytes.size()));
    std::mt19937_64 rng(42);
    for (int i = 0; i < 400; i++) {
        const size_t n = i < 200 ? rng() % h.size() : h.size() + rng() % data;
        SCOPED_TRACE("truncated to " + std::to_string(n));
        expect_error(bytes, {}, n);
    }
    expect_error(bytes, { "ends at data byte", "truncated?" }, bytes.size() - 1);
    expect_error(bytes, { "runs past the end", "truncated?" }, h.size() - 1);
}

TEST(Safetensors, AbsurdHeaderLengths) {
    auto bytes = small_file();
    for (uint64_t n : { uint64_t(0), uint64_t(1), uint64_t(1) << 63, ~uint64_t(0), rfdetr::k_st_max_header_bytes + 1 }) {
        auto b = bytes;
        for (int i = 0; i < 8; i++) {
            b[i] = static_cast<uint8_t>((n >> (8 * i)) & 0xff);
        }
        SCOPED_TRACE(n);
        expect_error(b, { "header length " + std::to_string(n), "not a safetensors file?" });
    }
    auto b = bytes;
    b[0] = static_cast<uint8_t>(bytes.size() & 0xff);  // fits the limit, but longer than the file
    b[1] = static_cast<uint8_t>(bytes.size() >> 8);
    b[2] = b[3] = b[4] = b[5] = b[6] = b[7] = 0;
    expect_error(b, { "runs past the end of the " + std::to_string(bytes.size()) + "-byte file" });
    // A PNG, a text file: not safetensors.
    const std::string png = "\x89PNG\r\n\x1a\n0000000000000000";
    expect_error(std::vector<uint8_t>(png.begin(), png.end()), { "header length" });
}

TEST(Safetensors, BadJson) {
    expect_error(with_header_text("{\"a\": {\"dtype\": \"F32\",", 0), { "not valid JSON" });
    expect_error(with_header_text("[1, 2, 3]", 0), { "JSON array, expected an object" });
    expect_error(with_header_text("\"text\"  ", 0), { "JSON string, expected an object" });
    expect_error(with_header_text("{} trailing", 0), { "not valid JSON" });
    expect_error(with_header_text("{\"t\": 5}", 0), { "tensor 't' entry is a JSON number" });
    expect_error(with_header_text("{\"__metadata__\": [1]}", 0), { "__metadata__ is a JSON array" });
    expect_error(with_header_text("{\"__metadata__\": {\"format\": 1}}", 0), { "__metadata__ value 'format' is not a string" });
    expect_error(with_header_text("{\"t\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4), { "tensor 't' has no 'data_offsets'" });
    expect_error(with_header_text("{\"t\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4), { "tensor 't' has no string 'dtype'" });
    expect_error(with_header_text("{\"t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4),
                 { "tensor 't' has shape [-1]", "non-negative integers" });
    expect_error(with_header_text("{\"t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4),
                 { "non-negative integers" });
    expect_error(with_header_text("{\"t\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], "
                                  "\"data_offsets\": [0, 4]}}", 4),
                 { "absurd shape" });
    expect_error(with_header_text("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, -4]}}", 4),
                 { "no 'data_offsets' pair of non-negative integers" });
    // An unterminated 1 MB string: the message quotes a bounded, printable excerpt.
    try {
        const auto bytes = with_header_text("{\"" + std::string(1 << 20, '\xe9'), 0);
        rfdetr::safetensors_parse(k_file, bytes.data(), bytes.size());
        ADD_FAILURE() << "no error";
    } catch (const rfdetr::error & e) {
        const std::string msg = e.what();
        EXPECT_LT(msg.size(), 600u);
        EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
        for (unsigned char c : msg) {
            ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << int(c);
        }
    }
    // Invalid UTF-8 in a key.
    expect_error(with_header_text("{\"\xff\xfe\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                 { "not valid JSON" });
}

TEST(Safetensors, WrongDtype) {
    expect_error(small_file({ { "w", { 4 }, "F16" } }), { "tensor 'w' has dtype F16", "F32 only" });
    expect_error(with_header_text("{\"w\": {\"dtype\": \"Q4_K\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                 { "tensor 'w' has unknown dtype 'Q4_K'" });
}

TEST(Safetensors, SizeOverlapGapAndPastEof) {
    expect_error(with_header_text("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 20),
                 { "tensor 'w' has data_offsets [0, 20] but F32[2, 3] needs 24 bytes" });
    expect_error(with_header_text("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8),
                 { "tensor 'w' has data_offsets [8, 0]" });
    expect_error(with_header_text("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                                  " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}", 16),
                 { "tensors 'a' [0, 16) and 'b' [8, 16) overlap" });
    expect_error(with_header_text("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                                  " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [12, 20]}}", 20),
                 { "data bytes [8, 12) belong to no tensor", "'b'" });
    expect_error(with_header_text("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12),
                 { "cover 8 data bytes but the data section is 12 bytes" });
    expect_error(with_header_text("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                                  " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 16),
                 { "tensor 'b' ends at data byte 24 but the data section is 16 bytes" });
}

TEST(Safetensors, RandomByteFlipsInTheHeaderNeverCrash) {
    // Flip 1-3 random bytes of the full RF-DETR-base header; parse + schema check must either accept the file
    // or throw rfdetr::error naming it.
    const std::string h    = rfdetr::synth_header({});
    uint64_t          data = 0;
    for (const auto & t : schema_tensors()) {
        data += static_cast<uint64_t>(numel(t.shape)) * 4;
    }
    std::vector<uint8_t> bytes(h.begin(), h.end());
    bytes.resize(h.size() + data);
    std::mt19937_64 rng(7);
    int             accepted = 0;
    int             refused  = 0;
    for (int i = 0; i < 300; i++) {
        std::vector<std::pair<size_t, uint8_t>> saved;
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; f++) {
            const size_t at = rng() % h.size();
            saved.emplace_back(at, bytes[at]);
            bytes[at] = static_cast<uint8_t>(rng() % 256);
        }
        try {
            const rfdetr::st_header hd = rfdetr::safetensors_parse(k_file, bytes.data(), bytes.size());
            EXPECT_EQ(rfdetr::checkpoint_check_tensors(k_file, hd), 91);
            accepted++;
        } catch (const rfdetr::error & e) {
            EXPECT_EQ(std::string(e.what()).rfind(k_file + ": ", 0), 0u) << e.what();
            refused++;
        }
        for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
            bytes[it->first] = it->second;
        }
    }
    EXPECT_GT(refused, 150);  // most flips must be caught
    EXPECT_EQ(accepted + refused, 300);
}
