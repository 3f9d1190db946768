// libFuzzer target: the checkpoint loader's config.json parse (model/config.cpp config_parse). The input is
// [variant index byte][class count byte][config.json text]: the schema of every embedded variant is reachable and
// class counts 1..256 (fine-tuned checkpoints). Only rfdetr::error may leave it; an accepted config has one label
// per class.
#include "common/error.h"
#include "model/checkpoint.h"
#include "model/schema.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
  if (size < 2) return 0;
  const auto &          all = rfdetr::schemas_all();
  const rfdetr::schema & sch = all[data[0] % all.size()];
  const int             classes = 1 + data[1];
  const std::string     text(reinterpret_cast<const char *>(data + 2), size - 2);
  try {
    const rfdetr::model_config cfg = rfdetr::config_parse("config.json", text, sch, classes);
    if (cfg.labels.size() != size_t(classes)) __builtin_trap();
  } catch (const rfdetr::error & e) {
    if (e.what()[0] == '\0') __builtin_trap();
  }
  return 0;
}
