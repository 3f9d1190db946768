// The decoder's own work, for bench/server/decode-micro.ts (bench, not a test): one PNG or JPEG decoded to
// 8-bit RGB N times by libpng's simplified API or libjpeg(-turbo) directly, in memory, on one thread, into one
// reused output buffer (no libvips, no thread pool, no fresh allocation per decode).
//   decode-floor FILE N [OUT.rgb]   ->   "<w>x<h> <library>: p50 <ms> ms, cpu <ms> ms/decode"; OUT gets the pixels
// Built by decode-micro.ts with `cc -O2 decode-floor.c -ljpeg -lpng` (the system's libjpeg-turbo and libpng).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jpeglib.h>
#include <png.h>

static double now_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp_double(const void * a, const void * b) {
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static unsigned char * out_buf;
static size_t out_cap;

static void out_reserve(size_t n) {
  if (n <= out_cap) return;
  out_buf = realloc(out_buf, n);
  out_cap = n;
  if (!out_buf) { fprintf(stderr, "decode-floor: out of memory for %zu bytes\n", n); exit(1); }
}

static void jpeg_decode(const unsigned char * buf, size_t n, int * w, int * h) {
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, buf, n);
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_RGB;
  jpeg_start_decompress(&c);
  *w = c.output_width;
  *h = c.output_height;
  out_reserve((size_t) *w * *h * 3);
  while (c.output_scanline < c.output_height) {
    unsigned char * row = out_buf + (size_t) c.output_scanline * *w * 3;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
}

static void png_decode(const unsigned char * buf, size_t n, int * w, int * h) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&im, buf, n)) { fprintf(stderr, "decode-floor: libpng: %s\n", im.message); exit(1); }
  im.format = PNG_FORMAT_RGB;
  *w = im.width;
  *h = im.height;
  out_reserve(PNG_IMAGE_SIZE(im));
  if (!png_image_finish_read(&im, NULL, out_buf, 0, NULL)) { fprintf(stderr, "decode-floor: libpng: %s\n", im.message); exit(1); }
}

int main(int argc, char ** argv) {
  if (argc < 3) { fprintf(stderr, "decode-floor: expected FILE N [OUT.rgb]\n"); return 2; }
  FILE * f = fopen(argv[1], "rb");
  if (!f) { fprintf(stderr, "decode-floor: cannot open %s\n", argv[1]); return 2; }
  fseek(f, 0, SEEK_END);
  size_t n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char * buf = malloc(n);
  if (fread(buf, 1, n, f) != n) { fprintf(stderr, "decode-floor: short read of %s\n", argv[1]); return 2; }
  fclose(f);
  int reps = atoi(argv[2]);
  int is_jpeg = n > 2 && buf[0] == 0xff && buf[1] == 0xd8;
  double * t = malloc(reps * sizeof(double));
  int w = 0, h = 0;
  double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < reps; i++) {
    double t0 = now_ms(CLOCK_MONOTONIC);
    if (is_jpeg) jpeg_decode(buf, n, &w, &h); else png_decode(buf, n, &w, &h);
    t[i] = now_ms(CLOCK_MONOTONIC) - t0;
  }
  double c1 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  qsort(t, reps, sizeof(double), cmp_double);
  printf("%dx%d %s: p50 %.3f ms, cpu %.3f ms/decode\n", w, h, is_jpeg ? "libjpeg" : "libpng", t[reps / 2], (c1 - c0) / reps);
  if (argc > 3) {
    FILE * o = fopen(argv[3], "wb");
    fwrite(out_buf, 1, (size_t) w * h * 3, o);
    fclose(o);
  }
  return 0;
}
