// rfdetr::error, the exception every layer throws for a failure an operator or user can act on (a bad
// checkpoint, an engine that cannot start, a socket that cannot be opened). Its own header so that the lower
// layers (model/) can throw it without including the engine interface.
#pragma once

#include <stdexcept>

namespace rfdetr {

// The message says what was wrong, what was expected, and what to do (and names the file when a file is at
// fault).
class error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace rfdetr
