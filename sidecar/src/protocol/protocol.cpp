// The sidecar protocol codec on msgpack-cxx (Debian libmsgpack-cxx-dev). See sidecar/PROTOCOL.md.
#include "protocol/protocol.h"

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <cstring>

namespace rfdetr {

const char * wire_error_str(wire_error e) {
    for (const auto & entry : k_wire_errors) {
        if (entry.code == e) {
            return entry.name;
        }
    }
    return "E_NONE";
}

wire_error wire_error_from_str(const char * name, unsigned long len) {
    for (const auto & entry : k_wire_errors) {
        if (std::strlen(entry.name) == len && std::memcmp(entry.name, name, len) == 0) {
            return entry.code;
        }
    }
    return wire_error::WIRE_ERROR_NONE;
}

const char * wire_op_str(wire_op op) {
    switch (op) {
        case wire_op::WIRE_OP_HELLO: return "hello";
        case wire_op::WIRE_OP_INFER: return "infer";
        case wire_op::WIRE_OP_PING: return "ping";
        case wire_op::WIRE_OP_SHUTDOWN: return "shutdown";
        case wire_op::WIRE_OP_SHM_ATTACH: return "shm_attach";
        case wire_op::WIRE_OP_DECODERS: return "decoders";
        case wire_op::WIRE_OP_NONE: break;
    }
    return "none";
}

namespace {

// Limits passed to the unpacker so a hostile header cannot make it allocate: a frame holds at most one
// map of a few keys (one of them the image map), the labels array and a few binaries.
const char * const k_ops_text = "infer, ping, shutdown, shm_attach, decoders";

const msgpack::unpack_limit k_unpack_limit(/*array*/ 4096, /*map*/ 32, /*str*/ 1u << 20,
                                           /*bin*/ k_max_frame_bytes, /*ext*/ 0, /*depth*/ 4);

// Strings and binaries point into the payload instead of being copied (pixel_values is 3.7 MB).
bool reference_all(msgpack::type::object_type, std::size_t, void *) {
    return true;
}

struct field_name {
    const char * name;
    wire_field   field;
};

// The canonical key order (after "id"). encode_frame() writes in this order.
const field_name k_field_names[] = {
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
    {"image", WIRE_FIELD_IMAGE},
    {"pixel_values", WIRE_FIELD_PIXEL_VALUES},
    {"image_shm", WIRE_FIELD_IMAGE_SHM},
    {"image_encoded", WIRE_FIELD_IMAGE_ENCODED},
    {"logits", WIRE_FIELD_LOGITS},
    {"pred_boxes", WIRE_FIELD_PRED_BOXES},
    {"decode_ms", WIRE_FIELD_DECODE_MS},
    {"preprocess_ms", WIRE_FIELD_PREPROCESS_MS},
    {"forward_ms", WIRE_FIELD_FORWARD_MS},
    {"shm", WIRE_FIELD_SHM},
    {"decoders", WIRE_FIELD_DECODERS},
    {"error", WIRE_FIELD_ERROR},
};

const char * type_str(const msgpack::object & o) {
    switch (o.type) {
        case msgpack::type::NIL: return "nil";
        case msgpack::type::BOOLEAN: return "boolean";
        case msgpack::type::POSITIVE_INTEGER: return "unsigned integer";
        case msgpack::type::NEGATIVE_INTEGER: return "negative integer";
        case msgpack::type::FLOAT32: return "float32";
        case msgpack::type::FLOAT64: return "float64";
        case msgpack::type::STR: return "string";
        case msgpack::type::BIN: return "binary";
        case msgpack::type::ARRAY: return "array";
        case msgpack::type::MAP: return "map";
        case msgpack::type::EXT: return "ext";
    }
    return "unknown";
}

std::string as_string(const msgpack::object & o) {
    return std::string(o.via.str.ptr, o.via.str.size);
}

bool key_is(const msgpack::object & key, const char * name) {
    return key.via.str.size == std::strlen(name) && std::memcmp(key.via.str.ptr, name, key.via.str.size) == 0;
}

decode_result fail(wire_error code, uint64_t id, std::string text) {
    decode_result r;
    r.error   = code;
    r.id      = id;
    r.message = std::move(text);
    return r;
}

std::string expected(const char * field, const char * what, const msgpack::object & got) {
    return std::string("field '") + field + "' must be " + what + ", got " + type_str(got);
}

// A non-negative number (uint or float) into `dst`; an error text, or "".
std::string decode_ms(const char * name, const msgpack::object & v, double & dst) {
    if (v.type == msgpack::type::FLOAT32 || v.type == msgpack::type::FLOAT64) {
        dst = v.via.f64;
    } else if (v.type == msgpack::type::POSITIVE_INTEGER) {
        dst = static_cast<double>(v.via.u64);
    } else {
        return expected(name, "a number", v);
    }
    if (!(dst >= 0.0)) {
        return std::string("field '") + name + "' must be a non-negative number";
    }
    return "";
}

// A map field whose keys are exactly `names`, each once, string keys, no others: take(j, "field.key", value)
// checks and stores key j's value and returns what was wrong, or "". A missing key is named, in `names` order.
template <size_t N, typename Take>
std::string decode_keyed_map(const char * field, const char * const (&names)[N], const msgpack::object & v, Take take) {
    const auto list = [&names] {
        std::string l;
        for (size_t j = 0; j < N; j++) {
            l += (j ? ", " : "") + std::string(names[j]);
        }
        return l;
    };
    if (v.type != msgpack::type::MAP) {
        return expected(field, ("a map {" + list() + "}").c_str(), v);
    }
    bool have[N] = {};
    for (uint32_t i = 0; i < v.via.map.size; i++) {
        const auto & k = v.via.map.ptr[i].key;
        if (k.type != msgpack::type::STR) {
            return std::string("field '") + field + "' must have string keys, got " + type_str(k);
        }
        size_t which = N;
        for (size_t j = 0; j < N; j++) {
            if (key_is(k, names[j]) && !have[j]) {
                which = j;
            }
        }
        if (which == N) {
            return std::string("field '") + field + "' has an unknown or repeated key '" + as_string(k) + "'; expected " +
                   list();
        }
        std::string err = take(which, std::string(field) + "." + names[which], v.via.map.ptr[i].val);
        if (!err.empty()) {
            return err;
        }
        have[which] = true;
    }
    for (size_t j = 0; j < N; j++) {
        if (!have[j]) {
            return std::string("field '") + field + "' lacks '" + names[j] + "'; expected {" + list() + "}";
        }
    }
    return "";
}

std::string take_uint(const std::string & full, const msgpack::object & ev, uint64_t & dst) {
    if (ev.type != msgpack::type::POSITIVE_INTEGER) {
        return expected(full.c_str(), "an unsigned integer", ev);
    }
    dst = ev.via.u64;
    return "";
}

std::string take_bin(const std::string & full, const char * what, const msgpack::object & ev, byte_view & dst) {
    if (ev.type != msgpack::type::BIN) {
        return expected(full.c_str(), what, ev);
    }
    dst = {reinterpret_cast<const uint8_t *>(ev.via.bin.ptr), ev.via.bin.size};
    return "";
}

std::string take_str(const std::string & full, const char * what, const msgpack::object & ev, std::string & dst) {
    if (ev.type != msgpack::type::STR) {
        return expected(full.c_str(), what, ev);
    }
    dst = as_string(ev);
    return "";
}

// The image map {width, height, rgb}.
std::string decode_image(const msgpack::object & v, message & out) {
    static const char * const names[] = {"width", "height", "rgb"};
    return decode_keyed_map("image", names, v, [&out](size_t j, const std::string & full, const msgpack::object & ev) {
        return j == 2 ? take_bin(full, "binary (RGB u8, row-major)", ev, out.image_rgb)
                      : take_uint(full, ev, j == 0 ? out.image_width : out.image_height);
    });
}

// The shared-memory image reference {name, offset, length, width, height}.
std::string decode_image_shm(const msgpack::object & v, message & out) {
    static const char * const names[] = {"name", "offset", "length", "width", "height"};
    return decode_keyed_map("image_shm", names, v, [&out](size_t j, const std::string & full, const msgpack::object & ev) {
        uint64_t * const dst[] = {nullptr, &out.shm_offset, &out.shm_length, &out.image_width, &out.image_height};
        return j == 0 ? take_str(full, "a string (a slot file's name)", ev, out.shm_name) : take_uint(full, ev, *dst[j]);
    });
}

// The image file {format, width, height, bytes}.
std::string decode_image_encoded(const msgpack::object & v, message & out) {
    static const char * const names[] = {"format", "width", "height", "bytes"};
    return decode_keyed_map("image_encoded", names, v, [&out](size_t j, const std::string & full, const msgpack::object & ev) {
        if (j == 0) {
            return take_str(full, "a string (\"jpeg\" or \"png\")", ev, out.encoded_format_name);
        }
        if (j == 3) {
            return take_bin(full, "binary (the image file)", ev, out.encoded_bytes);
        }
        return take_uint(full, ev, j == 1 ? out.image_width : out.image_height);
    });
}

// An array of strings (labels, decoders) into `dst`.
std::string decode_strings(const char * name, const msgpack::object & v, std::vector<std::string> & dst) {
    if (v.type != msgpack::type::ARRAY) {
        return expected(name, "an array of strings", v);
    }
    for (uint32_t i = 0; i < v.via.array.size; i++) {
        if (v.via.array.ptr[i].type != msgpack::type::STR) {
            return expected(name, "an array of strings", v.via.array.ptr[i]);
        }
        dst.push_back(as_string(v.via.array.ptr[i]));
    }
    return "";
}

// The shm_attach reply's {paths, slot_bytes}.
std::string decode_shm(const msgpack::object & v, message & out) {
    if (v.type != msgpack::type::MAP || v.via.map.size != 2) {
        return expected("shm", "a map {paths, slot_bytes}", v);
    }
    bool have_paths = false, have_bytes = false;
    for (uint32_t i = 0; i < 2; i++) {
        const auto & k  = v.via.map.ptr[i].key;
        const auto & ev = v.via.map.ptr[i].val;
        if (k.type == msgpack::type::STR && key_is(k, "paths") && !have_paths) {
            if (ev.type != msgpack::type::ARRAY) {
                return expected("shm.paths", "an array of strings", ev);
            }
            for (uint32_t j = 0; j < ev.via.array.size; j++) {
                if (ev.via.array.ptr[j].type != msgpack::type::STR) {
                    return expected("shm.paths", "an array of strings", ev.via.array.ptr[j]);
                }
                out.shm_paths.push_back(as_string(ev.via.array.ptr[j]));
            }
            have_paths = true;
        } else if (k.type == msgpack::type::STR && key_is(k, "slot_bytes") && !have_bytes) {
            if (ev.type != msgpack::type::POSITIVE_INTEGER) {
                return expected("shm.slot_bytes", "an unsigned integer", ev);
            }
            out.shm_slot_bytes = ev.via.u64;
            have_bytes         = true;
        } else {
            return "field 'shm' has an unknown or repeated key; expected paths, slot_bytes";
        }
    }
    return "";
}

// Decodes one known field into `out`; returns an error text, or "" when the value is well-typed.
std::string decode_field(wire_field f, const char * name, const msgpack::object & v, message & out) {
    switch (f) {
        case WIRE_FIELD_OK:
            if (v.type != msgpack::type::BOOLEAN) {
                return expected(name, "a boolean", v);
            }
            out.ok = v.via.boolean;
            return "";
        case WIRE_FIELD_PROTOCOL_VERSION:
        case WIRE_FIELD_NUM_QUERIES:
        case WIRE_FIELD_NUM_CLASSES: {
            if (v.type != msgpack::type::POSITIVE_INTEGER) {
                return expected(name, "an unsigned integer", v);
            }
            uint64_t & dst = f == WIRE_FIELD_PROTOCOL_VERSION ? out.protocol_version
                             : f == WIRE_FIELD_NUM_QUERIES    ? out.num_queries
                                                              : out.num_classes;
            dst = v.via.u64;
            return "";
        }
        case WIRE_FIELD_SIDECAR_VERSION:
        case WIRE_FIELD_ENGINE:
        case WIRE_FIELD_DEVICE:
        case WIRE_FIELD_VARIANT: {
            if (v.type != msgpack::type::STR) {
                return expected(name, "a string", v);
            }
            std::string & dst = f == WIRE_FIELD_SIDECAR_VERSION ? out.sidecar_version
                                : f == WIRE_FIELD_ENGINE        ? out.engine
                                : f == WIRE_FIELD_DEVICE        ? out.device
                                                                : out.variant;
            dst = as_string(v);
            return "";
        }
        case WIRE_FIELD_INPUT_SHAPE:
            if (v.type != msgpack::type::ARRAY || v.via.array.size != 3) {
                return expected(name, "an array of 3 unsigned integers", v);
            }
            for (uint32_t i = 0; i < 3; i++) {
                if (v.via.array.ptr[i].type != msgpack::type::POSITIVE_INTEGER) {
                    return expected(name, "an array of 3 unsigned integers", v.via.array.ptr[i]);
                }
                out.input_shape.push_back(v.via.array.ptr[i].via.u64);
            }
            return "";
        case WIRE_FIELD_LABELS: return decode_strings(name, v, out.labels);
        case WIRE_FIELD_DECODERS: return decode_strings(name, v, out.decoders);
        case WIRE_FIELD_PIXEL_VALUES:
        case WIRE_FIELD_LOGITS:
        case WIRE_FIELD_PRED_BOXES: {
            if (v.type != msgpack::type::BIN) {
                return expected(name, "binary (f32 little-endian)", v);
            }
            if (v.via.bin.size % 4 != 0) {
                return std::string("field '") + name + "' must hold whole f32 values, got " +
                       std::to_string(v.via.bin.size) + " bytes";
            }
            byte_view & dst = f == WIRE_FIELD_PIXEL_VALUES ? out.pixel_values
                              : f == WIRE_FIELD_LOGITS     ? out.logits
                                                           : out.pred_boxes;
            dst.data = reinterpret_cast<const uint8_t *>(v.via.bin.ptr);
            dst.size = v.via.bin.size;
            return "";
        }
        case WIRE_FIELD_IMAGE: return decode_image(v, out);
        case WIRE_FIELD_IMAGE_SHM: return decode_image_shm(v, out);
        case WIRE_FIELD_IMAGE_ENCODED: return decode_image_encoded(v, out);
        case WIRE_FIELD_SHM: return decode_shm(v, out);
        case WIRE_FIELD_DECODE_MS: return decode_ms(name, v, out.decode_ms);
        case WIRE_FIELD_PREPROCESS_MS: return decode_ms(name, v, out.preprocess_ms);
        case WIRE_FIELD_FORWARD_MS: return decode_ms(name, v, out.forward_ms);
        case WIRE_FIELD_ERROR: {
            if (v.type != msgpack::type::MAP) {
                return expected(name, "a map {code, message}", v);
            }
            bool have_code = false;
            bool have_message = false;
            for (uint32_t i = 0; i < v.via.map.size; i++) {
                const auto & k  = v.via.map.ptr[i].key;
                const auto & ev = v.via.map.ptr[i].val;
                if (k.type != msgpack::type::STR) {
                    return "field 'error' must have string keys";
                }
                if (key_is(k, "code") && !have_code) {
                    if (ev.type != msgpack::type::STR) {
                        return expected("error.code", "a string", ev);
                    }
                    out.error_code = wire_error_from_str(ev.via.str.ptr, ev.via.str.size);
                    if (out.error_code == wire_error::WIRE_ERROR_NONE) {
                        return "field 'error.code' is '" + as_string(ev) + "', which is not in the error table";
                    }
                    have_code = true;
                } else if (key_is(k, "message") && !have_message) {
                    if (ev.type != msgpack::type::STR) {
                        return expected("error.message", "a string", ev);
                    }
                    out.error_message = as_string(ev);
                    have_message = true;
                } else {
                    return "field 'error' has an unknown or repeated key '" + as_string(k) + "'";
                }
            }
            if (!have_code || !have_message) {
                return "field 'error' must carry both 'code' and 'message'";
            }
            return "";
        }
        case WIRE_FIELD_OP:
            break;
    }
    return "";
}

}  // namespace

decode_result frame_length_check(const uint8_t header[k_frame_header], uint32_t & length) {
    length = static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
             static_cast<uint32_t>(header[2]) << 16 | static_cast<uint32_t>(header[3]) << 24;
    if (length == 0) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0,
                    "frame length is 0; expected 1 to " + std::to_string(k_max_frame_bytes) + " bytes");
    }
    if (length > k_max_frame_bytes) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0,
                    "frame length " + std::to_string(length) + " exceeds the " + std::to_string(k_max_frame_bytes) +
                        "-byte cap (an 8192x8192 RGB image plus the envelope)");
    }
    return decode_result{};
}

decode_result decode_payload(const uint8_t * payload, size_t size, message & out) {
    out = message{};
    if (size == 0 || size > k_max_frame_bytes) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0,
                    "payload is " + std::to_string(size) + " bytes; expected 1 to " + std::to_string(k_max_frame_bytes));
    }
    msgpack::object_handle oh;
    size_t                 off = 0;
    try {
        oh = msgpack::unpack(reinterpret_cast<const char *>(payload), size, off, reference_all, nullptr,
                             k_unpack_limit);
    } catch (const std::exception & e) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0, std::string("payload is not valid MessagePack: ") + e.what());
    }
    if (off != size) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0,
                    std::to_string(size - off) + " trailing bytes after the message; a frame holds exactly one map");
    }
    const msgpack::object & root = oh.get();
    if (root.type != msgpack::type::MAP) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0, std::string("message must be a map, got ") + type_str(root));
    }

    // Pass 1: keys are strings, none repeated, and the id is readable (a frame without one cannot be answered).
    const msgpack::object * id_val = nullptr;
    const msgpack::object * op_val = nullptr;
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        const auto & k = root.via.map.ptr[i].key;
        if (k.type != msgpack::type::STR) {
            return fail(wire_error::WIRE_ERROR_FRAME, 0, std::string("map keys must be strings, got ") + type_str(k));
        }
        for (uint32_t j = 0; j < i; j++) {
            const auto & prev = root.via.map.ptr[j].key;
            if (prev.via.str.size == k.via.str.size && std::memcmp(prev.via.str.ptr, k.via.str.ptr, k.via.str.size) == 0) {
                return fail(wire_error::WIRE_ERROR_FRAME, 0, "key '" + as_string(k) + "' appears twice");
            }
        }
        if (key_is(k, "id")) {
            id_val = &root.via.map.ptr[i].val;
        } else if (key_is(k, "op")) {
            op_val = &root.via.map.ptr[i].val;
        }
    }
    if (!id_val) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0, "message has no 'id'; expected an unsigned integer");
    }
    if (id_val->type != msgpack::type::POSITIVE_INTEGER || id_val->via.u64 > 0xffffffffull) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0, "'id' must be an unsigned integer up to 4294967295");
    }
    const uint64_t id = id_val->via.u64;
    out.id            = id;

    // The op decides how the rest is judged, so it is checked before the other fields.
    if (op_val) {
        if (op_val->type != msgpack::type::STR) {
            return fail(wire_error::WIRE_ERROR_UNKNOWN_OP, id, std::string("'op' must be a string, got ") + type_str(*op_val));
        }
        const std::string op = as_string(*op_val);
        for (wire_op o : {wire_op::WIRE_OP_HELLO, wire_op::WIRE_OP_INFER, wire_op::WIRE_OP_PING, wire_op::WIRE_OP_SHUTDOWN,
                          wire_op::WIRE_OP_SHM_ATTACH, wire_op::WIRE_OP_DECODERS}) {
            if (op == wire_op_str(o)) {
                out.op = o;
            }
        }
        if (out.op == wire_op::WIRE_OP_NONE) {
            return fail(wire_error::WIRE_ERROR_UNKNOWN_OP, id,
                        "unknown op '" + op + "'; expected one of " + k_ops_text);
        }
        out.fields |= WIRE_FIELD_OP;
    }

    // Pass 2: every other key is known and well-typed.
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        const auto & k = root.via.map.ptr[i].key;
        if (key_is(k, "id") || key_is(k, "op")) {
            continue;
        }
        const field_name * known = nullptr;
        for (const auto & fn : k_field_names) {
            if (key_is(k, fn.name)) {
                known = &fn;
            }
        }
        if (!known) {
            return fail(wire_error::WIRE_ERROR_FIELD, id, "unknown field '" + as_string(k) + "'");
        }
        std::string err = decode_field(known->field, known->name, root.via.map.ptr[i].val, out);
        if (!err.empty()) {
            return fail(wire_error::WIRE_ERROR_FIELD, id, err);
        }
        out.fields |= known->field;
    }

    const uint32_t payload_fields = out.fields & ~(WIRE_FIELD_OP | WIRE_FIELD_OK);
    if (out.has(WIRE_FIELD_OK)) {
        // From the sidecar: the hello, or a reply.
        if (out.op == wire_op::WIRE_OP_HELLO) {
            // Version 2 (an older sidecar) has no `variant`; every other version carries it.
            const uint32_t want = out.has(WIRE_FIELD_PROTOCOL_VERSION) &&
                                          out.protocol_version == k_protocol_version_without_variant
                                      ? k_hello_fields_v2
                                      : k_hello_fields;
            if (out.fields != want) {
                return fail(wire_error::WIRE_ERROR_FIELD, id,
                            want == k_hello_fields ? "hello must carry exactly the fields in PROTOCOL.md"
                                                   : "a version-2 hello must carry exactly the version-2 fields "
                                                     "in PROTOCOL.md (no 'variant')");
            }
            if (out.labels.size() != out.num_classes) {
                return fail(wire_error::WIRE_ERROR_FIELD, id,
                            "hello has " + std::to_string(out.labels.size()) + " labels for " +
                                std::to_string(out.num_classes) + " classes");
            }
            return decode_result{};
        }
        if (out.op != wire_op::WIRE_OP_NONE) {
            return fail(wire_error::WIRE_ERROR_FIELD, id, "a reply carries no 'op' (only the hello does)");
        }
        if (!out.ok) {
            if (payload_fields != WIRE_FIELD_ERROR) {
                return fail(wire_error::WIRE_ERROR_FIELD, id, "an error reply carries exactly 'error'");
            }
            return decode_result{};
        }
        const uint32_t infer_reply =
            WIRE_FIELD_LOGITS | WIRE_FIELD_PRED_BOXES | WIRE_FIELD_PREPROCESS_MS | WIRE_FIELD_FORWARD_MS;
        if (payload_fields != 0 && payload_fields != infer_reply &&
            payload_fields != (infer_reply | WIRE_FIELD_DECODE_MS) && payload_fields != WIRE_FIELD_SHM &&
            payload_fields != WIRE_FIELD_DECODERS) {
            return fail(wire_error::WIRE_ERROR_FIELD, id,
                        "an ok reply carries nothing, exactly logits, pred_boxes, preprocess_ms and forward_ms (and "
                        "decode_ms after image_encoded), exactly shm, or exactly decoders");
        }
        return decode_result{};
    }

    // A request from a client.
    if (out.op == wire_op::WIRE_OP_NONE) {
        return fail(wire_error::WIRE_ERROR_UNKNOWN_OP, id,
                    std::string("request has no 'op'; expected one of ") + k_ops_text);
    }
    if (out.op == wire_op::WIRE_OP_HELLO) {
        return fail(wire_error::WIRE_ERROR_UNKNOWN_OP, id, "'hello' is sent by the sidecar, not requested");
    }
    if (id == 0) {
        return fail(wire_error::WIRE_ERROR_FRAME, 0, "request id 0 is reserved for the hello; use 1 to 4294967295");
    }
    const uint32_t inputs  = WIRE_FIELD_IMAGE | WIRE_FIELD_PIXEL_VALUES | WIRE_FIELD_IMAGE_SHM | WIRE_FIELD_IMAGE_ENCODED;
    const uint32_t allowed = out.op == wire_op::WIRE_OP_INFER ? inputs : 0u;
    if (payload_fields & ~allowed) {
        for (const auto & fn : k_field_names) {
            if (payload_fields & ~allowed & fn.field) {
                return fail(wire_error::WIRE_ERROR_FIELD, id,
                            std::string("field '") + fn.name + "' is not part of a '" + wire_op_str(out.op) + "' request");
            }
        }
    }
    const uint32_t given = out.fields & inputs;
    if (out.op == wire_op::WIRE_OP_INFER && (given == 0 || (given & (given - 1)) != 0)) {
        std::string names;
        int         count = 0;
        for (const auto & fn : k_field_names) {
            if (given & fn.field) {
                names += std::string(names.empty() ? "" : " and ") + "'" + fn.name + "'";
                count++;
            }
        }
        const std::string what = given == 0 ? "neither 'image' nor 'pixel_values' nor 'image_shm' nor 'image_encoded'"
                                 : count > 2 ? "all of " + names
                                             : "both " + names;
        return fail(wire_error::WIRE_ERROR_FIELD, id,
                    "infer request has " + what +
                        "; expected exactly one: image {width, height, rgb} (RGB u8), pixel_values (f32 CHW), "
                        "image_shm {name, offset, length, width, height} or image_encoded {format, width, height, "
                        "bytes}");
    }
    return decode_result{};
}

namespace {
struct vector_writer {
    std::vector<uint8_t> & out;
    void write(const char * p, size_t n) { out.insert(out.end(), p, p + n); }
};

void pack_str(msgpack::packer<vector_writer> & pk, const std::string & s) {
    pk.pack_str(static_cast<uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_bin(msgpack::packer<vector_writer> & pk, const byte_view & b) {
    pk.pack_bin(static_cast<uint32_t>(b.size));
    pk.pack_bin_body(reinterpret_cast<const char *>(b.data), static_cast<uint32_t>(b.size));
}

// msgpackr writes integral numbers below 2^32 as integers; mirror it so encodings agree.
void pack_ms(msgpack::packer<vector_writer> & pk, double ms) {
    if (ms >= 0.0 && ms < 4294967296.0 && ms == static_cast<double>(static_cast<uint64_t>(ms))) {
        pk.pack_uint64(static_cast<uint64_t>(ms));
    } else {
        pk.pack_double(ms);
    }
}
}  // namespace

void encode_frame(const message & m, std::vector<uint8_t> & out) {
    const size_t start = out.size();
    out.resize(start + k_frame_header);
    vector_writer                 w{out};
    msgpack::packer<vector_writer> pk(w);

    uint32_t count = 1;
    for (const auto & fn : k_field_names) {
        count += m.has(fn.field) ? 1 : 0;
    }
    pk.pack_map(count);
    pack_str(pk, "id");
    pk.pack_uint64(m.id);
    for (const auto & fn : k_field_names) {
        if (!m.has(fn.field)) {
            continue;
        }
        pack_str(pk, fn.name);
        switch (fn.field) {
            case WIRE_FIELD_OP: pack_str(pk, wire_op_str(m.op)); break;
            case WIRE_FIELD_OK: m.ok ? pk.pack_true() : pk.pack_false(); break;
            case WIRE_FIELD_PROTOCOL_VERSION: pk.pack_uint64(m.protocol_version); break;
            case WIRE_FIELD_SIDECAR_VERSION: pack_str(pk, m.sidecar_version); break;
            case WIRE_FIELD_ENGINE: pack_str(pk, m.engine); break;
            case WIRE_FIELD_DEVICE: pack_str(pk, m.device); break;
            case WIRE_FIELD_INPUT_SHAPE:
                pk.pack_array(static_cast<uint32_t>(m.input_shape.size()));
                for (uint64_t d : m.input_shape) {
                    pk.pack_uint64(d);
                }
                break;
            case WIRE_FIELD_NUM_QUERIES: pk.pack_uint64(m.num_queries); break;
            case WIRE_FIELD_NUM_CLASSES: pk.pack_uint64(m.num_classes); break;
            case WIRE_FIELD_LABELS:
                pk.pack_array(static_cast<uint32_t>(m.labels.size()));
                for (const auto & l : m.labels) {
                    pack_str(pk, l);
                }
                break;
            case WIRE_FIELD_VARIANT: pack_str(pk, m.variant); break;
            case WIRE_FIELD_IMAGE:
                pk.pack_map(3);
                pack_str(pk, "width");
                pk.pack_uint64(m.image_width);
                pack_str(pk, "height");
                pk.pack_uint64(m.image_height);
                pack_str(pk, "rgb");
                pack_bin(pk, m.image_rgb);
                break;
            case WIRE_FIELD_PIXEL_VALUES: pack_bin(pk, m.pixel_values); break;
            case WIRE_FIELD_IMAGE_SHM:
                pk.pack_map(5);
                pack_str(pk, "name");
                pack_str(pk, m.shm_name);
                pack_str(pk, "offset");
                pk.pack_uint64(m.shm_offset);
                pack_str(pk, "length");
                pk.pack_uint64(m.shm_length);
                pack_str(pk, "width");
                pk.pack_uint64(m.image_width);
                pack_str(pk, "height");
                pk.pack_uint64(m.image_height);
                break;
            case WIRE_FIELD_IMAGE_ENCODED:
                pk.pack_map(4);
                pack_str(pk, "format");
                pack_str(pk, m.encoded_format_name);
                pack_str(pk, "width");
                pk.pack_uint64(m.image_width);
                pack_str(pk, "height");
                pk.pack_uint64(m.image_height);
                pack_str(pk, "bytes");
                pack_bin(pk, m.encoded_bytes);
                break;
            case WIRE_FIELD_DECODERS:
                pk.pack_array(static_cast<uint32_t>(m.decoders.size()));
                for (const auto & d : m.decoders) {
                    pack_str(pk, d);
                }
                break;
            case WIRE_FIELD_SHM:
                pk.pack_map(2);
                pack_str(pk, "paths");
                pk.pack_array(static_cast<uint32_t>(m.shm_paths.size()));
                for (const auto & p : m.shm_paths) {
                    pack_str(pk, p);
                }
                pack_str(pk, "slot_bytes");
                pk.pack_uint64(m.shm_slot_bytes);
                break;
            case WIRE_FIELD_LOGITS: pack_bin(pk, m.logits); break;
            case WIRE_FIELD_PRED_BOXES: pack_bin(pk, m.pred_boxes); break;
            case WIRE_FIELD_DECODE_MS: pack_ms(pk, m.decode_ms); break;
            case WIRE_FIELD_PREPROCESS_MS: pack_ms(pk, m.preprocess_ms); break;
            case WIRE_FIELD_FORWARD_MS: pack_ms(pk, m.forward_ms); break;
            case WIRE_FIELD_ERROR:
                pk.pack_map(2);
                pack_str(pk, "code");
                pack_str(pk, wire_error_str(m.error_code));
                pack_str(pk, "message");
                pack_str(pk, m.error_message);
                break;
        }
    }
    const uint32_t len = static_cast<uint32_t>(out.size() - start - k_frame_header);
    out[start + 0]     = static_cast<uint8_t>(len);
    out[start + 1]     = static_cast<uint8_t>(len >> 8);
    out[start + 2]     = static_cast<uint8_t>(len >> 16);
    out[start + 3]     = static_cast<uint8_t>(len >> 24);
}

message make_error_reply(uint64_t id, wire_error code, const std::string & text) {
    message m;
    m.id            = id;
    m.fields        = WIRE_FIELD_OK | WIRE_FIELD_ERROR;
    m.ok            = false;
    m.error_code    = code;
    m.error_message = text;
    return m;
}

message make_ok_reply(uint64_t id) {
    message m;
    m.id     = id;
    m.fields = WIRE_FIELD_OK;
    m.ok     = true;
    return m;
}

}  // namespace rfdetr
