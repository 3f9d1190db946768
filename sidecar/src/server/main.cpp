// rfdetr-sidecar: the product binary, with the engines of engines/registry.cpp.
#include "server/server.h"

int main(int argc, char ** argv) {
    return rfdetr::sidecar_main(argc, argv, rfdetr::engine_registry());
}
