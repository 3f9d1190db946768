// libFuzzer target: the input is a byte stream as a client might send it. Every frame is length-checked and
// decoded; a frame that decodes must re-encode to a canonical frame that decodes again and re-encodes to the
// same bytes (the golden-frame property, for arbitrary messages). Crashes, sanitizer reports and a broken
// round trip are findings.
#include "protocol/protocol.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

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
        r = rfdetr::decode_payload(data + off, len, m);
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
        std::vector<uint8_t> once;
        rfdetr::encode_frame(m, once);
        rfdetr::message m2;
        auto            r2 = rfdetr::decode_payload(once.data() + rfdetr::k_frame_header, once.size() - rfdetr::k_frame_header, m2);
        if (r2.error != rfdetr::wire_error::WIRE_ERROR_NONE) {
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
