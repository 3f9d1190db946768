// rfdetr-sidecar-test: the sidecar with the built-in engines plus "test-echo" and "test-sleep". Test builds only.
#include "server/server.h"
#include "test-engine.h"

int main(int argc, char ** argv) {
    rfdetr::engine_factory f = rfdetr::engine_factory_default();
    f.create = [](const std::string & name, const std::string & dir, const rfdetr::engine_options & o) {
        if (name == "test-echo") {
            return rfdetr::test_echo_create(dir, o);
        }
        return name == "test-sleep" ? rfdetr::test_sleep_create(dir, o) : rfdetr::engine_create(name, dir, o);
    };
    f.names = [] {
        auto n = rfdetr::engine_names();
        n.push_back("test-echo");
        n.push_back("test-sleep");
        return n;
    };
    return rfdetr::sidecar_main(argc, argv, f);
}
