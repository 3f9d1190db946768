// The sidecar protocol codec on msgpack-cxx (Debian libmsgpack-cxx-dev), its reader: the envelope (length, one
// map, string keys, the id, the op) and which fields each message must carry. Field values: protocol-fields.cpp;
// the writer: protocol-encode.cpp. See sidecar/PROTOCOL.md.
#include "protocol/protocol-internal.h"

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

using wire::as_string;
using wire::k_field_names;
using wire::key_is;
using wire::type_str;

const char * const k_ops_text = "infer, ping, shutdown, shm_attach, decoders";

// Limits passed to the unpacker so a hostile header cannot make it allocate: a frame holds at most one
// map of a few keys (one of them the image map or the outputs map), the labels array, a select's classes and
// class_thresholds (one entry per class at most, like the labels), a reply's rows and a few binaries; the
// deepest value is a hello output's shape (message, outputs, one output, its shape).

const msgpack::unpack_limit k_unpack_limit(/*array*/ 4096, /*map*/ 4096, /*str*/ 1u << 20,
                                           /*bin*/ k_max_frame_bytes, /*ext*/ 0, /*depth*/ 4);

// Strings and binaries point into the payload instead of being copied (pixel_values is 3.7 MB).
bool reference_all(msgpack::type::object_type, std::size_t, void *) {
    return true;
}

decode_result fail(wire_error code, uint64_t id, std::string text) {
    decode_result r;
    r.error   = code;
    r.id      = id;
    r.message = std::move(text);
    return r;
}

// What a hello with `have` lacks or carries too many of, against the version's `want`.
std::string hello_fields_error(uint32_t want, uint32_t have) {
    const char * version = want == k_hello_fields_v2 ? "a version-2" : want == k_hello_fields_v3 ? "a version-3" : "a version-4";
    std::string  missing, extra;
    for (const auto & fn : k_field_names) {
        std::string & list = (want & ~have & fn.field) ? missing : extra;
        if ((want ^ have) & fn.field) {
            list += (list.empty() ? "'" : ", '") + std::string(fn.name) + "'";
        }
    }
    return std::string("hello must carry exactly the fields of ") + version + " hello in PROTOCOL.md" +
           (missing.empty() ? "" : "; it lacks " + missing) + (extra.empty() ? "" : "; it has no place for " + extra);
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
            // An empty key's ptr is null in msgpack-cxx, and memcmp(nullptr, ..., 0) is undefined behaviour
            // (protocol-fuzz found two empty keys): sizes first, bytes only when there are some.
            if (prev.via.str.size == k.via.str.size &&
                (k.via.str.size == 0 || std::memcmp(prev.via.str.ptr, k.via.str.ptr, k.via.str.size) == 0)) {
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
        const wire::field_name * known = nullptr;
        for (const auto & fn : k_field_names) {
            if (key_is(k, fn.name)) {
                known = &fn;
            }
        }
        if (!known) {
            return fail(wire_error::WIRE_ERROR_FIELD, id, "unknown field '" + as_string(k) + "'");
        }
        std::string err = wire::decode_field(known->field, known->name, root.via.map.ptr[i].val, out);
        if (!err.empty()) {
            return fail(wire_error::WIRE_ERROR_FIELD, id, err);
        }
        out.fields |= known->field;
    }

    const uint32_t payload_fields = out.fields & ~(WIRE_FIELD_OP | WIRE_FIELD_OK);
    if (out.has(WIRE_FIELD_OK)) {
        // From the sidecar: the hello, or a reply.
        if (out.op == wire_op::WIRE_OP_HELLO) {
            // The version says which fields: 2 (an older sidecar) has no `variant`, 3 no task, outputs,
            // precision, precisions or host_cores; every other version carries version 4's.
            const uint64_t v    = out.has(WIRE_FIELD_PROTOCOL_VERSION) ? out.protocol_version : k_protocol_version;
            const uint32_t want = v == k_protocol_version_v2 ? k_hello_fields_v2
                                  : v == k_protocol_version_v3 ? k_hello_fields_v3
                                                               : k_hello_fields;
            if (out.fields != want) {
                return fail(wire_error::WIRE_ERROR_FIELD, id, hello_fields_error(want, out.fields));
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
        // An infer reply: version 4's `outputs`, or a version-3 sidecar's top-level logits and pred_boxes.
        const uint32_t timing   = WIRE_FIELD_PREPROCESS_MS | WIRE_FIELD_FORWARD_MS;
        const uint32_t infer    = payload_fields & ~WIRE_FIELD_DECODE_MS;
        const bool     is_infer = (infer & ~WIRE_FIELD_ROWS) == (WIRE_FIELD_OUTPUTS | timing) ||
                              infer == (WIRE_FIELD_V3_LOGITS | WIRE_FIELD_V3_PRED_BOXES | timing);
        if (payload_fields != 0 && !is_infer && payload_fields != WIRE_FIELD_SHM && payload_fields != WIRE_FIELD_DECODERS) {
            return fail(wire_error::WIRE_ERROR_FIELD, id,
                        "an ok reply carries nothing, exactly outputs, preprocess_ms and forward_ms (and rows for a "
                        "selected output, decode_ms after image_encoded; a version-3 sidecar: logits and pred_boxes for "
                        "outputs), exactly shm, "
                        "or exactly decoders");
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
    const uint32_t allowed = out.op == wire_op::WIRE_OP_INFER ? inputs | WIRE_FIELD_SELECT : 0u;
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

}  // namespace rfdetr
