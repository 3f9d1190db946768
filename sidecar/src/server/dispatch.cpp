#include "server/dispatch.h"

#include "protocol/protocol.h"

#include <cstdio>

#ifndef RFDETR_SIDECAR_VERSION
#define RFDETR_SIDECAR_VERSION "0.0.0"
#endif

namespace rfdetr {

namespace {

// Why an image's sides are out of range ("image.width is 0; expected 1 to 8192"), or "" when both are in it.
std::string side_error(const char * field, uint64_t width, uint64_t height) {
    for (const auto & side : {std::make_pair("width", width), std::make_pair("height", height)}) {
        if (side.second < 1 || side.second > k_max_image_side) {
            return std::string(field) + "." + side.first + " is " + std::to_string(side.second) + "; expected 1 to " +
                   std::to_string(k_max_image_side);
        }
    }
    return "";
}

// A probability the rule compares sigmoid scores with, or why not ("select.threshold is 1.5; expected ...").
std::string probability_error(const std::string & field, double v) {
    if (v >= 0.0 && v <= 1.0) {
        return "";
    }
    char got[32];
    std::snprintf(got, sizeof got, "%.17g", v);
    return field + " is " + got + "; expected a number from 0 to 1";
}

// The request's select as the rule takes it, or why its values are wrong (the codec checked the types).
std::string take_select(const wire_select & w, row_select & s) {
    if (std::string bad = probability_error("select.threshold", w.threshold); !bad.empty()) {
        return bad;
    }
    s.threshold   = w.threshold;
    s.max         = w.max;
    s.has_classes = w.has_classes;
    s.classes     = w.classes;
    for (const auto & [key, thr] : w.class_thresholds) {
        const std::string field = "select.class_thresholds['" + key + "']";
        const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos &&
                            (key.size() == 1 || key[0] != '0');
        const uint64_t id = digits ? std::stoull(key) : 0;
        if (!digits || id > 0xffffffffull) {
            return "select.class_thresholds has the key '" + key +
                   "'; expected a class id as a decimal string without leading zeros (\"0\", \"17\")";
        }
        if (std::string bad = probability_error(field, thr); !bad.empty()) {
            return bad;
        }
        for (const auto & prev : s.class_thresholds) {
            if (prev.first == id) {
                return "select.class_thresholds names class " + key + " twice";
            }
        }
        s.class_thresholds.emplace_back(id, thr);
    }
    return "";
}

}  // namespace

std::vector<uint8_t> hello_frame(const engine & eng, const engine_entry & entry, int input_size) {
    message hello;
    hello.id               = 0;
    hello.fields           = k_hello_fields;
    hello.op               = wire_op::WIRE_OP_HELLO;
    hello.ok               = true;
    hello.protocol_version = k_protocol_version;
    hello.sidecar_version  = RFDETR_SIDECAR_VERSION;
    hello.engine           = eng.name();
    hello.device           = eng.device();
    hello.input_shape      = {static_cast<uint64_t>(k_input_channels), static_cast<uint64_t>(input_size),
                              static_cast<uint64_t>(input_size)};
    hello.num_queries      = static_cast<uint64_t>(eng.num_queries());
    hello.num_classes      = static_cast<uint64_t>(eng.num_classes());
    hello.labels           = eng.labels();
    hello.labels.resize(hello.num_classes, "N/A");
    hello.variant          = eng.variant();
    hello.task             = eng.task();
    for (const auto & o : eng.outputs()) {
        hello.output_specs.push_back({o.name, "f32", o.shape, o.selected});
    }
    hello.precision  = eng.precision();
    hello.precisions = entry.precisions;
    hello.host_cores = entry.host_cores;
    std::vector<uint8_t> f;
    encode_frame(hello, f);
    return f;
}

dispatcher::dispatcher(pipeline & pipe, int input_size, const shm_dir & shm, send_fn send,
                       std::function<void()> begin_stop)
    : pipe_(pipe), input_size_(input_size), shm_(shm), send_(std::move(send)), begin_stop_(std::move(begin_stop)) {}

void dispatcher::shm_attach(uint64_t serial, uint64_t id, std::unique_ptr<shm_slots> & slots) {
    if (shm_.path.empty()) {
        reply_error(serial, id, wire_error::WIRE_ERROR_SHM,
                    "shared memory for frames is unavailable: " + shm_.why_not + "; send images in the frame");
        return;
    }
    if (!slots) {
        std::string err;
        slots = shm_slots::create(shm_.path, serial, err);
        if (!slots) {
            reply_error(serial, id, wire_error::WIRE_ERROR_SHM,
                        "shared memory for frames is unavailable: " + err + "; send images in the frame");
            return;
        }
    }
    message m         = make_ok_reply(id);
    m.fields         |= WIRE_FIELD_SHM;
    m.shm_paths       = slots->paths();
    m.shm_slot_bytes  = k_shm_slot_bytes;
    std::vector<uint8_t> f;
    encode_frame(m, f);
    send_(serial, f);
}

void dispatcher::reply_error(uint64_t serial, uint64_t id, wire_error code, const std::string & text) {
    std::vector<uint8_t> f;
    encode_frame(make_error_reply(id, code, text), f);
    send_(serial, f);
}

std::string dispatcher::handle(uint64_t serial, std::unique_ptr<shm_slots> & slots, frame_bytes payload,
                               bool stopping) {
    message req;
    auto    r = decode_payload(payload.data.get(), payload.size, req);
    if (r.error == wire_error::WIRE_ERROR_FRAME) {
        return r.message;
    }
    if (r.error != wire_error::WIRE_ERROR_NONE) {
        reply_error(serial, r.id, r.error, r.message);
        return "";
    }
    if (req.has(WIRE_FIELD_OK)) {
        reply_error(serial, req.id, wire_error::WIRE_ERROR_UNKNOWN_OP,
                    "clients send requests {id, op}; replies and hello come from the sidecar");
        return "";
    }
    switch (req.op) {
        case wire_op::WIRE_OP_PING: {
            std::vector<uint8_t> f;
            encode_frame(make_ok_reply(req.id), f);
            send_(serial, f);
            return "";
        }
        case wire_op::WIRE_OP_SHUTDOWN: {
            std::fprintf(stderr, "dispatcher_handle: client %llu asked to shut down\n", static_cast<unsigned long long>(serial));
            std::vector<uint8_t> f;
            encode_frame(make_ok_reply(req.id), f);
            send_(serial, f);
            begin_stop_();
            return "";
        }
        case wire_op::WIRE_OP_INFER: infer(serial, slots.get(), req, std::move(payload), stopping); return "";
        case wire_op::WIRE_OP_SHM_ATTACH: shm_attach(serial, req.id, slots); return "";
        case wire_op::WIRE_OP_DECODERS: {
            message m   = make_ok_reply(req.id);
            m.fields   |= WIRE_FIELD_DECODERS;
            m.decoders  = {encoded_format_name(encoded_format::jpeg), encoded_format_name(encoded_format::png)};
            std::vector<uint8_t> f;
            encode_frame(m, f);
            send_(serial, f);
            return "";
        }
        case wire_op::WIRE_OP_HELLO:
        case wire_op::WIRE_OP_NONE: break;
    }
    reply_error(serial, req.id, wire_error::WIRE_ERROR_UNKNOWN_OP, "unsupported op");
    return "";
}

void dispatcher::infer(uint64_t serial, shm_slots * slots, const message & req, frame_bytes payload, bool stopping) {
    const std::string s = std::to_string(input_size_);
    infer_job         j;
    j.conn_serial = serial;
    j.id          = req.id;
    if (req.has(WIRE_FIELD_SELECT)) {
        row_select sel;
        if (const std::string bad = take_select(req.select, sel); !bad.empty()) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD, bad);
            return;
        }
        j.select = std::move(sel);
    }
    if (req.has(WIRE_FIELD_PIXEL_VALUES)) {
        const size_t want = static_cast<size_t>(k_input_channels) * input_size_ * input_size_ * sizeof(float);
        if (req.pixel_values.size != want) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD,
                        "pixel_values has " + std::to_string(req.pixel_values.size) + " bytes; expected " +
                            std::to_string(want) + " (f32 [3," + s + "," + s + "] little-endian CHW)");
            return;
        }
        j.pixels = req.pixel_values.data;
    } else if (req.has(WIRE_FIELD_IMAGE_ENCODED)) {
        const std::string & name = req.encoded_format_name;
        if (name != encoded_format_name(encoded_format::jpeg) && name != encoded_format_name(encoded_format::png)) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD,
                        "image_encoded.format is '" + name + "'; expected one of jpeg, png (the decoders reply)");
            return;
        }
        if (const std::string bad = side_error("image_encoded", req.image_width, req.image_height); !bad.empty()) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD, bad);
            return;
        }
        if (req.encoded_bytes.size == 0) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD,
                        "image_encoded.bytes is empty; expected the whole " + name + " file");
            return;
        }
        j.format       = name == encoded_format_name(encoded_format::png) ? encoded_format::png : encoded_format::jpeg;
        j.encoded      = req.encoded_bytes.data;
        j.encoded_size = req.encoded_bytes.size;
        j.width        = static_cast<int>(req.image_width);
        j.height       = static_cast<int>(req.image_height);
    } else {
        if (const std::string bad = side_error("image", req.image_width, req.image_height); !bad.empty()) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD, bad);
            return;
        }
        const uint64_t want = req.image_width * req.image_height * 3;
        if (req.has(WIRE_FIELD_IMAGE_SHM)) {
            if (!slots) {
                reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD,
                            "image_shm names slot '" + req.shm_name +
                                "', but this connection has no slots; send shm_attach first");
                return;
            }
            const std::string bad = slots->resolve(req.shm_name, req.shm_offset, req.shm_length, req.image_width,
                                                   req.image_height, j.rgb, j.shm_keep);
            if (!bad.empty()) {
                reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD, bad);
                return;
            }
        } else if (req.image_rgb.size != want) {
            reply_error(serial, req.id, wire_error::WIRE_ERROR_FIELD,
                        "image.rgb has " + std::to_string(req.image_rgb.size) + " bytes; expected " +
                            std::to_string(req.image_width) + "*" + std::to_string(req.image_height) + "*3 = " +
                            std::to_string(want) + " (RGB u8, row-major)");
            return;
        } else {
            j.rgb = req.image_rgb.data;
        }
        j.width  = static_cast<int>(req.image_width);
        j.height = static_cast<int>(req.image_height);
    }
    if (stopping) {
        reply_error(serial, req.id, wire_error::WIRE_ERROR_STOPPING,
                    "the sidecar is shutting down; the request was not run: retry on a new sidecar");
        return;
    }
    j.payload = std::move(payload);  // the bytes stay where they are; rgb / pixels point into them
    pipe_.submit(std::move(j));
}

}  // namespace rfdetr
