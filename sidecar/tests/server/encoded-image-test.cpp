// Images the sidecar decodes (PROTOCOL.md): an image_encoded PNG or JPEG gets exactly the reply the same pixels
// get as `image`, with decode_ms, through both forms of the pipeline (test-echo resizes on the forward thread,
// test-sleep on the stage thread); a file the decoder declines is E_DECODE (not E_FORWARD) and the connection
// keeps serving; the decoders op and the field checks. The files come from the decode tests' builders: a PNG
// of known rows, and a JPEG whose pixels a plain libjpeg decode gives (both independent of the sidecar).
#include "jpeg-builder.h"
#include "png-builder.h"
#include "sidecar-harness.h"

namespace {

using namespace rfdetr_test;

message make_encoded_infer(uint64_t id, const std::string & format, int width, int height, const std::vector<uint8_t> & file) {
    message m             = make_request(id, rfdetr::wire_op::WIRE_OP_INFER);
    m.fields             |= rfdetr::WIRE_FIELD_IMAGE_ENCODED;
    m.encoded_format_name = format;
    m.image_width         = static_cast<uint64_t>(width);
    m.image_height        = static_cast<uint64_t>(height);
    m.encoded_bytes       = {file.data(), file.size()};
    return m;
}

std::vector<uint8_t> png_of(const std::vector<uint8_t> & rgb, int width, int height) {
    decode_test::png_spec s;
    s.width   = width;
    s.height  = height;
    s.rows    = rgb;
    s.filters = {0, 1, 2, 3, 4};
    s.level   = 1;
    return decode_test::make_png(s);
}

std::vector<uint8_t> bytes_of(const rfdetr::byte_view & b) {
    return std::vector<uint8_t>(b.data, b.data + b.size);
}

// Sends the file, then its pixels as `image`; both replies must carry the same logits and boxes.
void expect_same_as_image(client & c, uint64_t id, const std::string & format, int w, int h, const std::vector<uint8_t> & file,
                          const std::vector<uint8_t> & rgb, const std::string & what) {
    message              enc, img;
    std::vector<uint8_t> s1, s2;
    c.send_msg(make_encoded_infer(id, format, w, h, file));
    ASSERT_TRUE(c.recv_msg(enc, s1)) << what;
    ASSERT_TRUE(enc.ok) << what << ": " << enc.error_message;
    EXPECT_EQ(enc.id, id);
    EXPECT_TRUE(enc.has(rfdetr::WIRE_FIELD_DECODE_MS)) << what << ": the reply to image_encoded carries decode_ms";
    EXPECT_GT(enc.decode_ms, 0.0) << what;
    EXPECT_GT(enc.preprocess_ms, 0.0) << what;
    c.send_msg(make_image_infer(id + 1, w, h, rgb));
    ASSERT_TRUE(c.recv_msg(img, s2)) << what;
    ASSERT_TRUE(img.ok) << what << ": " << img.error_message;
    EXPECT_FALSE(img.has(rfdetr::WIRE_FIELD_DECODE_MS)) << what << ": only image_encoded replies carry decode_ms";
    EXPECT_EQ(bytes_of(reply_output(enc, "logits")), bytes_of(reply_output(img, "logits"))) << what;
    EXPECT_EQ(bytes_of(reply_output(enc, "pred_boxes")), bytes_of(reply_output(img, "pred_boxes"))) << what;
}

TEST_F(sidecar, an_encoded_png_or_jpeg_gets_the_reply_of_the_same_pixels_sent_as_image) {
    for (const char * engine : {"test-echo", "test-sleep"}) {
        sidecar_proc p;
        start(p, {"RFDETR_TEST_FORWARD_MS=1"}, {}, engine);
        client c;
        ASSERT_TRUE(c.open(socket_));
        uint64_t id = 10;
        // Growing, then shrinking, then past the 16 MiB the decode buffer keeps, then small again.
        for (const auto & wh : {std::pair{64, 48}, std::pair{333, 517}, std::pair{100, 80}, std::pair{2400, 2400}, std::pair{31, 17}}) {
            const auto rgb = noise_rgb(wh.first, wh.second, static_cast<uint32_t>(id));
            expect_same_as_image(c, id, "png", wh.first, wh.second, png_of(rgb, wh.first, wh.second), rgb,
                                 std::string(engine) + " png " + std::to_string(wh.first) + "x" + std::to_string(wh.second));
            id += 2;
        }
        for (bool progressive : {false, true}) {
            decode_test::jpeg_spec s;
            s.width       = 320;
            s.height      = 240;
            s.progressive = progressive;
            const auto file = decode_test::make_jpeg(s);
            const auto rgb  = decode_test::libjpeg_rgb(file);
            ASSERT_EQ(rgb.size(), 320u * 240u * 3u);
            expect_same_as_image(c, id, "jpeg", 320, 240, file, rgb, std::string(engine) + (progressive ? " progressive" : " baseline") + " jpeg");
            id += 2;
        }
    }
}

TEST_F(sidecar, a_file_the_decoder_declines_is_E_DECODE_and_the_connection_keeps_serving) {
    for (const char * engine : {"test-echo", "test-sleep"}) {
        sidecar_proc p;
        start(p, {"RFDETR_TEST_FORWARD_MS=1"}, {}, engine);
        client c;
        ASSERT_TRUE(c.open(socket_));
        const auto rgb = noise_rgb(40, 30, 3);
        const auto png = png_of(rgb, 40, 30);
        struct bad_case {
            std::string          what, format;
            int                  w, h;
            std::vector<uint8_t> file;
            std::string          needle;
        };
        const std::vector<bad_case> cases = {
            {"truncated png", "png", 40, 30, std::vector<uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)), "png"},
            {"not a jpeg", "jpeg", 40, 30, decode_test::lcg_bytes(500, 7), "jpeg"},
            {"png header 40x30 sent as 41x30", "png", 41, 30, png, "png"},
            {"a png sent as jpeg", "jpeg", 40, 30, png, "jpeg"},
        };
        uint64_t id = 20;
        for (const auto & bc : cases) {
            c.send_msg(make_encoded_infer(id, bc.format, bc.w, bc.h, bc.file));
            message              r;
            std::vector<uint8_t> s;
            ASSERT_TRUE(c.recv_msg(r, s)) << engine << " " << bc.what;
            EXPECT_EQ(r.id, id);
            ASSERT_FALSE(r.ok) << engine << " " << bc.what << " was decoded";
            EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_DECODE)
                << engine << " " << bc.what << ": " << rfdetr::wire_error_str(r.error_code) << ": " << r.error_message;
            EXPECT_NE(r.error_message.find("declined"), std::string::npos) << r.error_message;
            EXPECT_NE(r.error_message.find(bc.needle), std::string::npos) << r.error_message;
            EXPECT_NE(r.error_message.find("send it as image"), std::string::npos) << r.error_message;
            id++;
            // The same connection still serves: a ping, and the good file.
            c.send_msg(make_request(id, rfdetr::wire_op::WIRE_OP_PING));
            ASSERT_TRUE(c.recv_msg(r, s));
            EXPECT_TRUE(r.ok && r.id == id) << engine << " after " << bc.what;
            id++;
        }
        expect_same_as_image(c, id, "png", 40, 30, png, rgb, std::string(engine) + " after the declines");
    }
}

TEST_F(sidecar, decoders_names_jpeg_and_png_and_image_encoded_fields_are_checked) {
    sidecar_proc p;
    start(p);
    client c;
    ASSERT_TRUE(c.open(socket_));
    message              r;
    std::vector<uint8_t> s;
    c.send_msg(make_request(5, rfdetr::wire_op::WIRE_OP_DECODERS));
    ASSERT_TRUE(c.recv_msg(r, s));
    ASSERT_TRUE(r.ok) << r.error_message;
    EXPECT_TRUE(r.has(rfdetr::WIRE_FIELD_DECODERS));
    EXPECT_EQ(r.decoders, (std::vector<std::string>{"jpeg", "png"}));

    const auto png = png_of(noise_rgb(4, 4, 1), 4, 4);
    struct bad_case {
        std::string          format;
        int                  w, h;
        std::vector<uint8_t> file;
        std::string          needle;
    };
    const std::vector<bad_case> cases = {
        {"gif", 4, 4, png, "image_encoded.format is 'gif'; expected one of jpeg, png"},
        {"png", 4, 4, {}, "image_encoded.bytes is empty; expected the whole png file"},
        {"png", 0, 4, png, "image_encoded.width is 0; expected 1 to 8192"},
        {"jpeg", 4, 8193, png, "image_encoded.height is 8193; expected 1 to 8192"},
    };
    uint64_t id = 6;
    for (const auto & bc : cases) {
        c.send_msg(make_encoded_infer(id, bc.format, bc.w, bc.h, bc.file));
        ASSERT_TRUE(c.recv_msg(r, s));
        EXPECT_EQ(r.id, id);
        ASSERT_FALSE(r.ok) << bc.needle;
        EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FIELD) << r.error_message;
        EXPECT_NE(r.error_message.find(bc.needle), std::string::npos) << r.error_message;
        id++;
    }
    EXPECT_TRUE(serves_a_ping(socket_, 99));
}

}  // namespace
