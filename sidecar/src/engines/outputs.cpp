// The persistent output buffers a forward fills, one per declared output.
#include "engines/outputs.h"

#include "common/error.h"

namespace rfdetr {

output_buffers::output_buffers(std::vector<output_spec> specs) : specs_(std::move(specs)) {
    values_.reserve(specs_.size());
    for (const auto & s : specs_) {
        values_.emplace_back(s.count());
    }
}

float * output_buffers::at(const std::string & name) {
    for (size_t i = 0; i < specs_.size(); i++) {
        if (specs_[i].name == name) {
            return values_[i].data();
        }
    }
    std::string have;
    for (const auto & s : specs_) {
        have += (have.empty() ? "" : ", ") + s.name;
    }
    throw error("output_buffers::at: no output named '" + name + "'; this engine's task declares " +
                (have.empty() ? std::string("none") : have));
}

}  // namespace rfdetr
