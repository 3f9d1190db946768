// The protocol codec's writer: one message to one frame, keys in the canonical order (protocol-internal.h),
// numbers in msgpackr's forms, so both languages produce identical bytes for the golden frames.
#include "protocol/protocol-internal.h"

#include <cstring>

namespace rfdetr {

using wire::k_field_names;

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

void pack_strs(msgpack::packer<vector_writer> & pk, const std::vector<std::string> & v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (const auto & s : v) {
        pack_str(pk, s);
    }
}

void pack_uints(msgpack::packer<vector_writer> & pk, const std::vector<uint64_t> & v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (uint64_t d : v) {
        pk.pack_uint64(d);
    }
}

// The hello's outputs: [{name, dtype, shape, rows?}], keys in that order, rows only on a selected output.
void pack_output_specs(msgpack::packer<vector_writer> & pk, const message & m) {
    pk.pack_array(static_cast<uint32_t>(m.output_specs.size()));
    for (const auto & s : m.output_specs) {
        pk.pack_map(s.selected ? 4 : 3);
        pack_str(pk, "name");
        pack_str(pk, s.name);
        pack_str(pk, "dtype");
        pack_str(pk, s.dtype);
        pack_str(pk, "shape");
        pack_uints(pk, s.shape);
        if (s.selected) {
            pack_str(pk, "rows");
            pack_str(pk, "selected");
        }
    }
}

// An infer reply's outputs: {name: bin}, in the hello's order.
void pack_output_values(msgpack::packer<vector_writer> & pk, const message & m) {
    pk.pack_map(static_cast<uint32_t>(m.outputs.size()));
    for (const auto & o : m.outputs) {
        pack_str(pk, o.name);
        pack_bin(pk, o.data);
    }
}

// msgpackr writes integral numbers below 2^32 as integers; mirror it so encodings agree.
void pack_number(msgpack::packer<vector_writer> & pk, double v) {
    if (v >= 0.0 && v < 4294967296.0 && v == static_cast<double>(static_cast<uint64_t>(v))) {
        pk.pack_uint64(static_cast<uint64_t>(v));
    } else if (v >= 18446744073709551616.0) {
        // From 2^64 up (2^64 is a client's uint64 maximum read as a double): msgpack-cxx's pack_double and
        // pack_float admit 2^64 to their integer path (their bound, double(UINT64_MAX), rounds up to 2^64) and
        // convert it to uint64_t, which is undefined behaviour (protocol-fuzz under UBSan,
        // finding-protocol-threshold-2p64). Written here as the float64 they write for larger values: 0xcb and
        // the 8 bytes big-endian, appended as a body (pack_str_body appends its bytes as they are).
        uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        char raw[9] = {static_cast<char>(0xcb)};
        for (int i = 0; i < 8; i++) {
            raw[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
        }
        pk.pack_str_body(raw, sizeof raw);
    } else {
        pk.pack_double(v);
    }
}

// An infer request's select {threshold, max, classes?, class_thresholds?}, keys in that order.
void pack_select(msgpack::packer<vector_writer> & pk, const wire_select & s) {
    pk.pack_map(2 + (s.has_classes ? 1 : 0) + (s.has_class_thresholds ? 1 : 0));
    pack_str(pk, "threshold");
    pack_number(pk, s.threshold);
    pack_str(pk, "max");
    pk.pack_uint64(s.max);
    if (s.has_classes) {
        pack_str(pk, "classes");
        pack_uints(pk, s.classes);
    }
    if (s.has_class_thresholds) {
        pack_str(pk, "class_thresholds");
        pk.pack_map(static_cast<uint32_t>(s.class_thresholds.size()));
        for (const auto & [id, thr] : s.class_thresholds) {
            pack_str(pk, id);
            pack_number(pk, thr);
        }
    }
}

// An infer reply's rows: {name: [query, ...]}, in the hello's order.
void pack_rows(msgpack::packer<vector_writer> & pk, const message & m) {
    pk.pack_map(static_cast<uint32_t>(m.rows.size()));
    for (const auto & r : m.rows) {
        pack_str(pk, r.name);
        pack_uints(pk, r.queries);
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
            case WIRE_FIELD_INPUT_SHAPE: pack_uints(pk, m.input_shape); break;
            case WIRE_FIELD_NUM_QUERIES: pk.pack_uint64(m.num_queries); break;
            case WIRE_FIELD_NUM_CLASSES: pk.pack_uint64(m.num_classes); break;
            case WIRE_FIELD_LABELS: pack_strs(pk, m.labels); break;
            case WIRE_FIELD_VARIANT: pack_str(pk, m.variant); break;
            case WIRE_FIELD_TASK: pack_str(pk, m.task); break;
            case WIRE_FIELD_OUTPUTS:
                if (m.op == wire_op::WIRE_OP_HELLO) {
                    pack_output_specs(pk, m);
                } else {
                    pack_output_values(pk, m);
                }
                break;
            case WIRE_FIELD_PRECISION: pack_str(pk, m.precision); break;
            case WIRE_FIELD_PRECISIONS: pack_strs(pk, m.precisions); break;
            case WIRE_FIELD_HOST_CORES: m.host_cores ? pk.pack_true() : pk.pack_false(); break;
            case WIRE_FIELD_ROWS: pack_rows(pk, m); break;
            case WIRE_FIELD_SELECT: pack_select(pk, m.select); break;
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
            case WIRE_FIELD_DECODERS: pack_strs(pk, m.decoders); break;
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
            case WIRE_FIELD_V3_LOGITS: pack_bin(pk, m.v3_logits); break;
            case WIRE_FIELD_V3_PRED_BOXES: pack_bin(pk, m.v3_pred_boxes); break;
            case WIRE_FIELD_DECODE_MS: pack_number(pk, m.decode_ms); break;
            case WIRE_FIELD_PREPROCESS_MS: pack_number(pk, m.preprocess_ms); break;
            case WIRE_FIELD_FORWARD_MS: pack_number(pk, m.forward_ms); break;
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
