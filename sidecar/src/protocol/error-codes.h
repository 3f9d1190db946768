// The protocol's error codes, kept by hand from the table in sidecar/PROTOCOL.md ("Error codes").
// tests/protocol parses that table and fails when this list differs from it.
#pragma once

namespace rfdetr {

enum class wire_error {
    WIRE_ERROR_NONE = 0,
    WIRE_ERROR_FRAME,       // malformed frame; the connection is closed after the reply
    WIRE_ERROR_UNKNOWN_OP,  // op missing, not a string or unknown
    WIRE_ERROR_FIELD,       // field missing, unknown, wrong type or wrong size
    WIRE_ERROR_FORWARD,     // the engine's forward failed
    WIRE_ERROR_STOPPING,    // the sidecar is shutting down and did not run the request
    WIRE_ERROR_SHM,         // shared memory for frames is unavailable (shm_attach)
    WIRE_ERROR_DECODE,      // the sidecar declined to decode an image_encoded file; the client decodes it
};

struct wire_error_entry {
    wire_error  code;
    const char * name;
    bool         closes_connection;
};

constexpr wire_error_entry k_wire_errors[] = {
    {wire_error::WIRE_ERROR_FRAME, "E_FRAME", true},
    {wire_error::WIRE_ERROR_UNKNOWN_OP, "E_UNKNOWN_OP", false},
    {wire_error::WIRE_ERROR_FIELD, "E_FIELD", false},
    {wire_error::WIRE_ERROR_FORWARD, "E_FORWARD", false},
    {wire_error::WIRE_ERROR_STOPPING, "E_STOPPING", false},
    {wire_error::WIRE_ERROR_SHM, "E_SHM", false},
    {wire_error::WIRE_ERROR_DECODE, "E_DECODE", false},
};

// "E_FRAME", ...; "E_NONE" for WIRE_ERROR_NONE.
const char * wire_error_str(wire_error e);
// WIRE_ERROR_NONE when the name is not in the table.
wire_error wire_error_from_str(const char * name, unsigned long len);

}  // namespace rfdetr
