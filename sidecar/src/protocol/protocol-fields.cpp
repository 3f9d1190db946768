// The protocol codec's field decoders: each known key's value checked for type and stored in the message
// (protocol.cpp decides which keys a message must carry). See sidecar/PROTOCOL.md.
#include "protocol/protocol-internal.h"

#include <cstring>

namespace rfdetr {
namespace wire {

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


namespace {

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

// A map field whose keys are `names`, each at most once, string keys, no others, the first `required` of them
// present: take(j, "field.key", value) checks and stores key j's value and returns what was wrong, or "". A
// missing key is named, in `names` order.
template <size_t N, typename Take>
std::string decode_keyed_map(const char * field, const char * const (&names)[N], const msgpack::object & v, Take take,
                             size_t required = N) {
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
    for (size_t j = 0; j < required; j++) {
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

// The hello's outputs: an array of {name, dtype, shape, rows?}, names unique, dtype "f32" (the only one today),
// rows "selected" when present.
std::string decode_output_specs(const msgpack::object & v, message & out) {
    if (v.type != msgpack::type::ARRAY) {
        return expected("outputs", "an array of maps {name, dtype, shape}", v);
    }
    static const char * const names[] = {"name", "dtype", "shape", "rows"};
    for (uint32_t i = 0; i < v.via.array.size; i++) {
        const std::string field = "outputs[" + std::to_string(i) + "]";
        wire_output_spec  spec;
        std::string       rows;
        std::string err = decode_keyed_map(field.c_str(), names, v.via.array.ptr[i],
                                           [&spec, &rows](size_t j, const std::string & full, const msgpack::object & ev) {
            if (j == 3) {
                return take_str(full, "a string (\"selected\")", ev, rows);
            }
            if (j == 0) {
                return take_str(full, "a string", ev, spec.name);
            }
            if (j == 1) {
                return take_str(full, "a string (\"f32\")", ev, spec.dtype);
            }
            if (ev.type != msgpack::type::ARRAY) {
                return expected(full.c_str(), "an array of unsigned integers", ev);
            }
            for (uint32_t k = 0; k < ev.via.array.size; k++) {
                if (ev.via.array.ptr[k].type != msgpack::type::POSITIVE_INTEGER) {
                    return expected(full.c_str(), "an array of unsigned integers", ev.via.array.ptr[k]);
                }
                spec.shape.push_back(ev.via.array.ptr[k].via.u64);
            }
            return std::string();
        }, 3);
        if (!err.empty()) {
            return err;
        }
        if (v.via.array.ptr[i].via.map.size == 4 && rows != "selected") {
            return "field '" + field + ".rows' is '" + rows + "'; expected selected (or no rows key)";
        }
        spec.selected = v.via.array.ptr[i].via.map.size == 4;
        if (spec.selected && spec.shape.empty()) {
            return "field '" + field + "' selects rows but its shape has no axis 0 to select along";
        }
        if (spec.dtype != "f32") {
            return "field '" + field + ".dtype' is '" + spec.dtype + "'; expected f32";
        }
        for (const auto & s : out.output_specs) {
            if (s.name == spec.name) {
                return "field 'outputs' names '" + spec.name + "' twice";
            }
        }
        out.output_specs.push_back(std::move(spec));
    }
    return "";
}

// An infer reply's outputs: a map name -> binary (f32 little-endian), names unique. Whether they are the
// hello's names and sizes is the client's check (it has the hello).
std::string decode_output_values(const msgpack::object & v, message & out) {
    if (v.type != msgpack::type::MAP) {
        return expected("outputs", "a map of output name to binary (f32 little-endian)", v);
    }
    for (uint32_t i = 0; i < v.via.map.size; i++) {
        const auto & k  = v.via.map.ptr[i].key;
        const auto & ev = v.via.map.ptr[i].val;
        if (k.type != msgpack::type::STR) {
            return std::string("field 'outputs' must have string keys, got ") + type_str(k);
        }
        wire_output o;
        o.name                 = as_string(k);
        const std::string full = "outputs." + o.name;
        if (std::string err = take_bin(full, "binary (f32 little-endian)", ev, o.data); !err.empty()) {
            return err;
        }
        if (o.data.size % 4 != 0) {
            return "field '" + full + "' must hold whole f32 values, got " + std::to_string(o.data.size) + " bytes";
        }
        for (const auto & prev : out.outputs) {
            if (prev.name == o.name) {
                return "field 'outputs' has the key '" + o.name + "' twice";
            }
        }
        out.outputs.push_back(o);
    }
    return "";
}

// A number (uint or float) into `dst`: msgpackr writes an integral one as an integer.
std::string take_number(const std::string & full, const msgpack::object & ev, double & dst) {
    if (ev.type == msgpack::type::FLOAT32 || ev.type == msgpack::type::FLOAT64) {
        dst = ev.via.f64;
    } else if (ev.type == msgpack::type::POSITIVE_INTEGER) {
        dst = static_cast<double>(ev.via.u64);
    } else if (ev.type == msgpack::type::NEGATIVE_INTEGER) {
        // A number too: msgpack-cxx's pack_double (and msgpackr) write an integral negative double as an integer,
        // so refusing it broke our own round trip of threshold -1.0 (protocol-fuzz); the server judges the range.
        dst = static_cast<double>(ev.via.i64);
    } else {
        return expected(full.c_str(), "a number", ev);
    }
    return "";
}

// An infer request's select {threshold, max, classes?, class_thresholds?}.
std::string decode_select(const msgpack::object & v, message & out) {
    static const char * const names[] = {"threshold", "max", "classes", "class_thresholds"};
    wire_select & s = out.select;
    return decode_keyed_map("select", names, v, [&s](size_t j, const std::string & full, const msgpack::object & ev) {
        if (j == 0) {
            return take_number(full, ev, s.threshold);
        }
        if (j == 1) {
            return take_uint(full, ev, s.max);
        }
        if (j == 2) {
            if (ev.type != msgpack::type::ARRAY) {
                return expected(full.c_str(), "an array of unsigned integers (class ids)", ev);
            }
            for (uint32_t k = 0; k < ev.via.array.size; k++) {
                if (ev.via.array.ptr[k].type != msgpack::type::POSITIVE_INTEGER) {
                    return expected(full.c_str(), "an array of unsigned integers (class ids)", ev.via.array.ptr[k]);
                }
                s.classes.push_back(ev.via.array.ptr[k].via.u64);
            }
            s.has_classes = true;
            return std::string();
        }
        if (ev.type != msgpack::type::MAP) {
            return expected(full.c_str(), "a map of class id (a decimal string) to threshold", ev);
        }
        for (uint32_t k = 0; k < ev.via.map.size; k++) {
            const auto & key = ev.via.map.ptr[k].key;
            if (key.type != msgpack::type::STR) {
                return expected(full.c_str(), "a map with string keys (class ids as decimal strings)", key);
            }
            double thr = 0.0;
            if (std::string err = take_number(full + "." + as_string(key), ev.via.map.ptr[k].val, thr); !err.empty()) {
                return err;
            }
            s.class_thresholds.emplace_back(as_string(key), thr);
        }
        s.has_class_thresholds = true;
        return std::string();
    }, 2);
}

// An infer reply's rows: a map output name -> array of query indices, names unique. Whether they match the
// hello's selected outputs and the values' sizes is the client's check.
std::string decode_rows(const msgpack::object & v, message & out) {
    if (v.type != msgpack::type::MAP) {
        return expected("rows", "a map of output name to an array of unsigned integers (query indices)", v);
    }
    for (uint32_t i = 0; i < v.via.map.size; i++) {
        const auto & k  = v.via.map.ptr[i].key;
        const auto & ev = v.via.map.ptr[i].val;
        if (k.type != msgpack::type::STR) {
            return std::string("field 'rows' must have string keys, got ") + type_str(k);
        }
        wire_rows r;
        r.name                 = as_string(k);
        const std::string full = "rows." + r.name;
        if (ev.type != msgpack::type::ARRAY) {
            return expected(full.c_str(), "an array of unsigned integers (query indices)", ev);
        }
        for (uint32_t j = 0; j < ev.via.array.size; j++) {
            if (ev.via.array.ptr[j].type != msgpack::type::POSITIVE_INTEGER) {
                return expected(full.c_str(), "an array of unsigned integers (query indices)", ev.via.array.ptr[j]);
            }
            r.queries.push_back(ev.via.array.ptr[j].via.u64);
        }
        for (const auto & prev : out.rows) {
            if (prev.name == r.name) {
                return "field 'rows' has the key '" + r.name + "' twice";
            }
        }
        out.rows.push_back(std::move(r));
    }
    return "";
}

}  // namespace

std::string decode_field(wire_field f, const char * name, const msgpack::object & v, message & out) {
    switch (f) {
        case WIRE_FIELD_OK:
        case WIRE_FIELD_HOST_CORES:
            if (v.type != msgpack::type::BOOLEAN) {
                return expected(name, "a boolean", v);
            }
            (f == WIRE_FIELD_OK ? out.ok : out.host_cores) = v.via.boolean;
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
        case WIRE_FIELD_VARIANT:
        case WIRE_FIELD_TASK:
        case WIRE_FIELD_PRECISION: {
            if (v.type != msgpack::type::STR) {
                return expected(name, "a string", v);
            }
            std::string & dst = f == WIRE_FIELD_SIDECAR_VERSION ? out.sidecar_version
                                : f == WIRE_FIELD_ENGINE        ? out.engine
                                : f == WIRE_FIELD_DEVICE        ? out.device
                                : f == WIRE_FIELD_VARIANT       ? out.variant
                                : f == WIRE_FIELD_TASK          ? out.task
                                                                : out.precision;
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
        case WIRE_FIELD_PRECISIONS: return decode_strings(name, v, out.precisions);
        case WIRE_FIELD_OUTPUTS:
            return out.op == wire_op::WIRE_OP_HELLO ? decode_output_specs(v, out) : decode_output_values(v, out);
        case WIRE_FIELD_PIXEL_VALUES:
        case WIRE_FIELD_V3_LOGITS:
        case WIRE_FIELD_V3_PRED_BOXES: {
            if (v.type != msgpack::type::BIN) {
                return expected(name, "binary (f32 little-endian)", v);
            }
            if (v.via.bin.size % 4 != 0) {
                return std::string("field '") + name + "' must hold whole f32 values, got " +
                       std::to_string(v.via.bin.size) + " bytes";
            }
            byte_view & dst = f == WIRE_FIELD_PIXEL_VALUES ? out.pixel_values
                              : f == WIRE_FIELD_V3_LOGITS  ? out.v3_logits
                                                           : out.v3_pred_boxes;
            dst.data = reinterpret_cast<const uint8_t *>(v.via.bin.ptr);
            dst.size = v.via.bin.size;
            return "";
        }
        case WIRE_FIELD_IMAGE: return decode_image(v, out);
        case WIRE_FIELD_IMAGE_SHM: return decode_image_shm(v, out);
        case WIRE_FIELD_IMAGE_ENCODED: return decode_image_encoded(v, out);
        case WIRE_FIELD_SELECT: return decode_select(v, out);
        case WIRE_FIELD_ROWS: return decode_rows(v, out);
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

}  // namespace wire
}  // namespace rfdetr
