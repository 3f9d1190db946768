// The output buffers a forward fills, one per declared output, the selected outputs' rows, and the check that
// the forward filled them all.
#include "engines/outputs.h"

#include "common/error.h"

namespace rfdetr {

output_buffers::output_buffers(std::vector<output_spec> specs)
    : specs_(std::move(specs)), written_(specs_.size(), false) {
    values_.reserve(specs_.size());
    for (size_t i = 0; i < specs_.size(); i++) {
        const auto & s = specs_[i];
        values_.emplace_back(s.selected ? 0 : s.count());
        if (s.name == "logits" && s.shape.size() == 2) {
            logits_ = static_cast<int>(i);
        }
        if (s.selected && selected_ < 0) {
            selected_ = static_cast<int>(i);
        }
        if (s.selected && s.shape.empty()) {
            throw error("output_buffers: selected output '" + s.name + "' has no axis 0 to select rows along");
        }
    }
    if (selected_ >= 0 && logits_ < 0) {
        throw error("output_buffers: output '" + specs_[static_cast<size_t>(selected_)].name +
                    "' is selected by rows, but the task has no 'logits' [Q, C] output to select them from; add "
                    "it to the task's row");
    }
}

const std::vector<uint32_t> & output_buffers::rows() {
    if (selected_ < 0) {
        throw error("output_buffers::rows: this task has no selected output; only a task with one (segment) has rows");
    }
    if (!rows_ready_) {
        const auto li = static_cast<size_t>(logits_);
        if (!written_[li]) {
            throw error("output_buffers::rows: the selected rows come from the logits, which this forward has not "
                        "written yet; write 'logits' before asking for the rows or a selected output");
        }
        rows_.clear();
        if (selection_) {
            const auto & ls = specs_[li].shape;
            rows_ = select_rows(values_[li].data(), static_cast<int>(ls[0]), static_cast<int>(ls[1]), *selection_);
        }
        for (size_t i = 0; i < specs_.size(); i++) {
            if (specs_[i].selected) {
                values_[i].resize(rows_.size() * specs_[i].row_count());
            }
        }
        rows_ready_ = true;
    }
    return rows_;
}

float * output_buffers::at(const std::string & name) {
    for (size_t i = 0; i < specs_.size(); i++) {
        if (specs_[i].name == name) {
            if (specs_[i].selected) {
                rows();
            }
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

void output_buffers::begin_forward(std::optional<row_select> selection) {
    written_.assign(specs_.size(), false);
    selection_  = std::move(selection);
    rows_ready_ = false;
    rows_.clear();
    for (size_t i = 0; i < specs_.size(); i++) {
        if (specs_[i].selected) {
            values_[i].clear();
        }
    }
}

void output_buffers::check_written(const std::string & engine) {
    std::string missing;
    for (size_t i = 0; i < specs_.size(); i++) {
        if (written_[i]) {
            continue;
        }
        // A selected output with no rows needs no compute: no selection, or one that picked no query (known
        // once the logits are written; unwritten logits are named themselves).
        if (specs_[i].selected && (written_[static_cast<size_t>(logits_)] ? rows().empty() : !selection_)) {
            continue;
        }
        missing += (missing.empty() ? "'" : ", '") + specs_[i].name + "'";
    }
    if (!missing.empty()) {
        throw error("engine '" + engine + "' declares the output(s) " + missing +
                    " (its task's row in the task table) but its forward did not write them; fill them in the "
                    "engine's forward or declare another task");
    }
}

}  // namespace rfdetr
