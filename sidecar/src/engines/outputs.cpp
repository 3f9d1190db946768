// The persistent output buffers a forward fills, one per declared output, and the check that it filled them all.
#include "engines/outputs.h"

#include "common/error.h"

namespace rfdetr {

output_buffers::output_buffers(std::vector<output_spec> specs)
    : specs_(std::move(specs)), written_(specs_.size(), false) {
    values_.reserve(specs_.size());
    for (const auto & s : specs_) {
        values_.emplace_back(s.count());
    }
}

float * output_buffers::at(const std::string & name) {
    for (size_t i = 0; i < specs_.size(); i++) {
        if (specs_[i].name == name) {
            written_[i] = true;
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

void output_buffers::begin_forward() {
    written_.assign(specs_.size(), false);
}

void output_buffers::check_written(const std::string & engine) const {
    std::string missing;
    for (size_t i = 0; i < specs_.size(); i++) {
        if (!written_[i]) {
            missing += (missing.empty() ? "'" : ", '") + specs_[i].name + "'";
        }
    }
    if (!missing.empty()) {
        throw error("engine '" + engine + "' declares the output(s) " + missing +
                    " (its task's row in the task table) but its forward did not write them; fill them in the "
                    "engine's forward or declare another task");
    }
}

}  // namespace rfdetr
