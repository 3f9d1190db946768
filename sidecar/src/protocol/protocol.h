// The sidecar protocol codec (sidecar/PROTOCOL.md is the contract): u32 LE length + one MessagePack map.
// decode_payload() turns one payload into a message and says why when it cannot; encode_frame() writes
// a message in the canonical key order so both languages produce identical bytes for the golden frames.
#pragma once

#include "protocol/error-codes.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rfdetr {

// Version 4: the hello declares the task, the head outputs, precision, precisions and host_cores, and the infer
// reply carries the outputs by name. The sidecar speaks 4 only; the codec also reads and writes an older
// sidecar's version-3 and version-2 frames (the golden frames both languages share; PROTOCOL.md, "Versions").
constexpr uint32_t k_protocol_version    = 4;
constexpr uint32_t k_protocol_version_v3 = 3;  // hello with `variant`, reply with top-level logits and pred_boxes
constexpr uint32_t k_protocol_version_v2 = 2;  // hello without `variant`
constexpr uint32_t k_max_image_side   = 8192;
// The largest image the HTTP side accepts (8192x8192 RGB) plus room for the envelope.
constexpr uint32_t k_max_frame_bytes  = k_max_image_side * k_max_image_side * 3u + 65536u;  // 201392128
constexpr size_t   k_frame_header     = 4;

enum class wire_op {
    WIRE_OP_NONE = 0,
    WIRE_OP_HELLO,
    WIRE_OP_INFER,
    WIRE_OP_PING,
    WIRE_OP_SHUTDOWN,
    WIRE_OP_SHM_ATTACH,
    WIRE_OP_DECODERS,
};

const char * wire_op_str(wire_op op);

// Which fields a message carries; encode_frame() writes exactly these, in canonical order.
enum wire_field : uint32_t {
    WIRE_FIELD_OP               = 1u << 0,
    WIRE_FIELD_OK               = 1u << 1,
    WIRE_FIELD_PROTOCOL_VERSION = 1u << 2,
    WIRE_FIELD_SIDECAR_VERSION  = 1u << 3,
    WIRE_FIELD_ENGINE           = 1u << 4,
    WIRE_FIELD_DEVICE           = 1u << 5,
    WIRE_FIELD_INPUT_SHAPE      = 1u << 6,
    WIRE_FIELD_NUM_QUERIES      = 1u << 7,
    WIRE_FIELD_NUM_CLASSES      = 1u << 8,
    WIRE_FIELD_LABELS           = 1u << 9,
    WIRE_FIELD_IMAGE            = 1u << 10,
    WIRE_FIELD_PIXEL_VALUES     = 1u << 11,
    WIRE_FIELD_V3_LOGITS        = 1u << 12,  // a version-3 infer reply's; version 4 has `outputs`
    WIRE_FIELD_V3_PRED_BOXES    = 1u << 13,
    WIRE_FIELD_PREPROCESS_MS    = 1u << 14,
    WIRE_FIELD_FORWARD_MS       = 1u << 15,
    WIRE_FIELD_ERROR            = 1u << 16,
    WIRE_FIELD_IMAGE_SHM        = 1u << 17,
    WIRE_FIELD_SHM              = 1u << 18,
    WIRE_FIELD_VARIANT          = 1u << 19,
    WIRE_FIELD_IMAGE_ENCODED    = 1u << 20,
    WIRE_FIELD_DECODE_MS        = 1u << 21,
    WIRE_FIELD_DECODERS         = 1u << 22,
    WIRE_FIELD_TASK             = 1u << 23,
    WIRE_FIELD_OUTPUTS          = 1u << 24,  // the hello's output specs, or an infer reply's output values
    WIRE_FIELD_PRECISION        = 1u << 25,
    WIRE_FIELD_PRECISIONS       = 1u << 26,
    WIRE_FIELD_HOST_CORES       = 1u << 27,
    WIRE_FIELD_SELECT           = 1u << 28,  // an infer request's row selection for a selected output
    WIRE_FIELD_ROWS             = 1u << 29,  // an infer reply's query index per row of each selected output
};

// A version-2 hello (an older sidecar's) carries these; version 3 adds `variant`; version 4 the task, outputs,
// precision, precisions and host_cores.
constexpr uint32_t k_hello_fields_v2 = WIRE_FIELD_OP | WIRE_FIELD_OK | WIRE_FIELD_PROTOCOL_VERSION |
                                       WIRE_FIELD_SIDECAR_VERSION | WIRE_FIELD_ENGINE | WIRE_FIELD_DEVICE |
                                       WIRE_FIELD_INPUT_SHAPE | WIRE_FIELD_NUM_QUERIES | WIRE_FIELD_NUM_CLASSES |
                                       WIRE_FIELD_LABELS;
constexpr uint32_t k_hello_fields_v3 = k_hello_fields_v2 | WIRE_FIELD_VARIANT;
constexpr uint32_t k_hello_fields    = k_hello_fields_v3 | WIRE_FIELD_TASK | WIRE_FIELD_OUTPUTS | WIRE_FIELD_PRECISION |
                                    WIRE_FIELD_PRECISIONS | WIRE_FIELD_HOST_CORES;

// A borrowed byte range (points into the payload it was decoded from, or into caller-owned memory).
struct byte_view {
    const uint8_t * data = nullptr;
    size_t          size = 0;
};

// One head output as the hello declares it: {name, dtype, shape, rows?} ("f32" only today). `rows: "selected"`:
// an infer reply carries a subset of its rows along axis 0 (shape[0] is the bound) and names them in `rows`.
struct wire_output_spec {
    std::string           name;
    std::string           dtype;
    std::vector<uint64_t> shape;
    bool                  selected = false;
};

// An infer request's `select` {threshold, max, classes?, class_thresholds?}: the codec checks types, the server
// values (a threshold in 0..1, class ids as decimal strings).
struct wire_select {
    double                                   threshold = 0.0;
    uint64_t                                 max       = 0;
    bool                                     has_classes = false;
    std::vector<uint64_t>                    classes;
    bool                                     has_class_thresholds = false;
    std::vector<std::pair<std::string, double>> class_thresholds;  // in the frame's order
};

// An infer reply's `rows` entry: the query index of each row of selected output `name`, in row order.
struct wire_rows {
    std::string           name;
    std::vector<uint64_t> queries;
};

// One head output's values in an infer reply: f32 little-endian, product(shape) of the hello's spec.
struct wire_output {
    std::string name;
    byte_view   data;
};

struct message {
    uint64_t id     = 0;
    uint32_t fields = 0;  // wire_field bits
    wire_op  op     = wire_op::WIRE_OP_NONE;
    bool     ok     = false;

    // hello
    uint64_t                 protocol_version = 0;
    std::string              sidecar_version;
    std::string              engine;
    std::string              device;
    std::vector<uint64_t>    input_shape;
    uint64_t                 num_queries = 0;
    uint64_t                 num_classes = 0;
    std::vector<std::string> labels;
    std::string              variant;  // the loaded checkpoint's: "base", "nano", ... (schema::variant)
    std::string                   task;          // "detect"
    std::vector<wire_output_spec> output_specs;  // the hello's `outputs`, in reply order
    std::string                   precision;     // what this engine instance runs
    std::vector<std::string>      precisions;    // what the engine can run, its default first
    bool                          host_cores = false;

    // infer request: exactly one of image {width, height, rgb}, pixel_values, image_shm and image_encoded
    uint64_t  image_width  = 0;
    uint64_t  image_height = 0;
    byte_view image_rgb;  // RGB u8 HWC row-major
    byte_view pixel_values;
    // infer request, the shared-memory form: image_shm {name, offset, length, width, height}; width and
    // height go to image_width / image_height
    std::string shm_name;
    uint64_t    shm_offset = 0;
    uint64_t    shm_length = 0;
    // infer request, the file form: image_encoded {format, width, height, bytes}; width and height (the
    // client's reading of the header) go to image_width / image_height
    std::string encoded_format_name;  // "jpeg", "png" (checked by the server, not the codec)
    byte_view   encoded_bytes;        // the whole file
    // infer request: the optional row selection (WIRE_FIELD_SELECT)
    wire_select select;
    // decoders reply: the encoded formats this sidecar decodes
    std::vector<std::string> decoders;
    // shm_attach reply: shm {paths, slot_bytes}
    std::vector<std::string> shm_paths;
    uint64_t                 shm_slot_bytes = 0;
    // infer reply: `outputs` (version 4), or a version-3 reply's top-level logits and pred_boxes
    std::vector<wire_output> outputs;
    std::vector<wire_rows>   rows;  // version 4, a task with a selected output: WIRE_FIELD_ROWS
    byte_view                v3_logits;
    byte_view                v3_pred_boxes;
    double    decode_ms     = 0.0;  // only after image_encoded (WIRE_FIELD_DECODE_MS)
    double    preprocess_ms = 0.0;
    double    forward_ms    = 0.0;

    // error reply
    wire_error  error_code = wire_error::WIRE_ERROR_NONE;
    std::string error_message;

    bool has(wire_field f) const { return (fields & f) != 0; }
};

struct decode_result {
    wire_error  error = wire_error::WIRE_ERROR_NONE;  // NONE: msg is valid
    std::string message;                              // what was wrong, when error != NONE
    uint64_t    id = 0;                               // the id, when it could be read (else 0)
};

// Reads the u32 LE length at `header` and checks it against the cap. WIRE_ERROR_FRAME for 0 or over cap.
decode_result frame_length_check(const uint8_t header[k_frame_header], uint32_t & length);

// Decodes one payload (the bytes after the length). Byte fields of `out` point into `payload`, which must
// outlive it. Requests (op set, ok absent) are checked for the op's required fields; replies and hello
// are checked for field types. Sizes (image sides, byte counts) are the server's to check. Errors: WIRE_ERROR_FRAME (connection must close), WIRE_ERROR_UNKNOWN_OP,
// WIRE_ERROR_FIELD (reply with `id`).
decode_result decode_payload(const uint8_t * payload, size_t size, message & out);

// Appends one frame (length + payload) for `msg` to `out`, keys in canonical order.
void encode_frame(const message & msg, std::vector<uint8_t> & out);

// Convenience builders.
message make_error_reply(uint64_t id, wire_error code, const std::string & text);
message make_ok_reply(uint64_t id);

}  // namespace rfdetr
