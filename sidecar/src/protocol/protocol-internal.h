// What the codec's three parts share (protocol.cpp: the envelope and each message's shape; protocol-fields.cpp:
// each field's value; protocol-encode.cpp: the writer): the canonical key table and msgpack helpers.
#pragma once

#include "protocol/protocol.h"

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <string>

namespace rfdetr {
namespace wire {

struct field_name {
    const char * name;
    wire_field   field;
};

// The canonical key order (after "id"). encode_frame() writes in this order. `outputs` is one key in two
// messages: the hello's output specs and an infer reply's values, at the hello fields' position.
constexpr field_name k_field_names[] = {
    {"op", WIRE_FIELD_OP},
    {"ok", WIRE_FIELD_OK},
    {"protocol_version", WIRE_FIELD_PROTOCOL_VERSION},
    {"sidecar_version", WIRE_FIELD_SIDECAR_VERSION},
    {"engine", WIRE_FIELD_ENGINE},
    {"device", WIRE_FIELD_DEVICE},
    {"input_shape", WIRE_FIELD_INPUT_SHAPE},
    {"num_queries", WIRE_FIELD_NUM_QUERIES},
    {"num_classes", WIRE_FIELD_NUM_CLASSES},
    {"labels", WIRE_FIELD_LABELS},
    {"variant", WIRE_FIELD_VARIANT},
    {"task", WIRE_FIELD_TASK},
    {"outputs", WIRE_FIELD_OUTPUTS},
    {"rows", WIRE_FIELD_ROWS},
    {"precision", WIRE_FIELD_PRECISION},
    {"precisions", WIRE_FIELD_PRECISIONS},
    {"host_cores", WIRE_FIELD_HOST_CORES},
    {"image", WIRE_FIELD_IMAGE},
    {"pixel_values", WIRE_FIELD_PIXEL_VALUES},
    {"image_shm", WIRE_FIELD_IMAGE_SHM},
    {"image_encoded", WIRE_FIELD_IMAGE_ENCODED},
    {"select", WIRE_FIELD_SELECT},
    {"logits", WIRE_FIELD_V3_LOGITS},
    {"pred_boxes", WIRE_FIELD_V3_PRED_BOXES},
    {"decode_ms", WIRE_FIELD_DECODE_MS},
    {"preprocess_ms", WIRE_FIELD_PREPROCESS_MS},
    {"forward_ms", WIRE_FIELD_FORWARD_MS},
    {"shm", WIRE_FIELD_SHM},
    {"decoders", WIRE_FIELD_DECODERS},
    {"error", WIRE_FIELD_ERROR},
};

const char * type_str(const msgpack::object & o);
std::string  as_string(const msgpack::object & o);
bool         key_is(const msgpack::object & key, const char * name);

// Decodes one known field's value into `out` (out.op is already set: `outputs` is read by it); returns what
// was wrong, or "" when the value is well-typed.
std::string decode_field(wire_field f, const char * name, const msgpack::object & v, message & out);

}  // namespace wire
}  // namespace rfdetr
