// libFuzzer target: the input is a byte stream as a client might send it. Every frame is length-checked and
// decoded (each op's input map: hello, infer with image / image_shm / image_encoded / pixel_values / select,
// ping, shutdown, shm_attach, decoders, and the replies); every byte field of a decoded message must point inside
// its own payload; a frame that decodes must re-encode to a canonical frame that decodes again and re-encodes to
// the same bytes (the golden-frame property, for arbitrary messages). Crashes, sanitizer reports, a view outside
// the payload and a broken round trip are findings.
#include "protocol/protocol.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool inside(const rfdetr::byte_view & v, const uint8_t * payload, size_t len) {
    if (v.size == 0) {
        return true;
    }
    return v.data >= payload && v.size <= len && v.data <= payload + (len - v.size);
}

bool views_inside(const rfdetr::message & m, const uint8_t * payload, size_t len) {
    bool ok = inside(m.image_rgb, payload, len) && inside(m.pixel_values, payload, len) &&
              inside(m.encoded_bytes, payload, len) && inside(m.v3_logits, payload, len) &&
              inside(m.v3_pred_boxes, payload, len);
    for (const auto & o : m.outputs) {
        ok = ok && inside(o.data, payload, len);
    }
    return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    size_t off = 0;
    while (size - off >= rfdetr::k_frame_header) {
        uint32_t len = 0;
        auto     r   = rfdetr::frame_length_check(data + off, len);
        if (r.error != rfdetr::wire_error::WIRE_ERROR_NONE) {
            return 0;  // the server closes the connection here
        }
        off += rfdetr::k_frame_header;
        if (size - off < len) {
            return 0;  // incomplete frame: the server waits for more bytes
        }
        rfdetr::message m;
        const uint8_t * payload = data + off;
        r = rfdetr::decode_payload(payload, len, m);
        off += len;
        if (r.error == rfdetr::wire_error::WIRE_ERROR_FRAME) {
            return 0;
        }
        if (r.error != rfdetr::wire_error::WIRE_ERROR_NONE) {
            if (r.message.empty()) {
                __builtin_trap();  // every rejection must say why
            }
            continue;  // answered with an error; the connection stays open
        }
        if (!views_inside(m, payload, len)) {
            __builtin_trap();  // a byte field must borrow from its own payload
        }
        std::vector<uint8_t> once;
        rfdetr::encode_frame(m, once);
        rfdetr::message m2;
        auto            r2 = rfdetr::decode_payload(once.data() + rfdetr::k_frame_header, once.size() - rfdetr::k_frame_header, m2);
        if (r2.error != rfdetr::wire_error::WIRE_ERROR_NONE) {
            std::fprintf(stderr, "protocol-fuzz: the re-encoded frame does not decode: %s\n", r2.message.c_str());
            __builtin_trap();  // our own encoding must decode
        }
        std::vector<uint8_t> twice;
        rfdetr::encode_frame(m2, twice);
        if (once != twice) {
            __builtin_trap();  // the encoding must be canonical
        }
    }
    return 0;
}
