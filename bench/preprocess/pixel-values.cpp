// The sidecar's preprocess as a command, for bench/server/fast-decode.ts (not a test): RGB u8 in, the
// model's pixel_values f32 [3,S,S] out, through the same rfdetr::preprocessor the sidecar runs.
//   pixel-values WIDTH HEIGHT IN.rgb OUT.f32 [SIZE=560]
#include "preprocess/preprocess.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "main: usage: pixel-values WIDTH HEIGHT IN.rgb OUT.f32 [SIZE=560]\n");
        return 2;
    }
    const int    w    = std::atoi(argv[1]);
    const int    h    = std::atoi(argv[2]);
    const int    size = argc > 5 ? std::atoi(argv[5]) : 560;
    const size_t n    = static_cast<size_t>(w) * h * 3;
    if (w < 1 || h < 1 || size < 1) {
        std::fprintf(stderr, "main: expected positive WIDTH, HEIGHT and SIZE, got %s %s %d\n", argv[1], argv[2], size);
        return 2;
    }
    std::vector<uint8_t> rgb(n);
    FILE *               in = std::fopen(argv[3], "rb");
    if (!in || std::fread(rgb.data(), 1, n, in) != n) {
        std::fprintf(stderr, "main: %s does not hold %zu bytes (%dx%d RGB)\n", argv[3], n, w, h);
        return 1;
    }
    std::fclose(in);
    std::vector<float>  out(static_cast<size_t>(3) * size * size);
    rfdetr::preprocessor p(size);
    p.run(rgb.data(), w, h, out.data());
    FILE * f = std::fopen(argv[4], "wb");
    if (!f || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "main: cannot write %s\n", argv[4]);
        return 1;
    }
    return 0;
}
