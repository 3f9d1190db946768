// rfdetr-sidecar-test: the sidecar with the built-in engines plus "test-echo" and "test-sleep". Test builds only.
#include "server/server.h"
#include "test-engine.h"

int main(int argc, char ** argv) {
    return rfdetr::sidecar_main(argc, argv, rfdetr::test_engine_table());
}
