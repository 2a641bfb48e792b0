// simdjson 3.9.4 behind a C interface, so that benches/core.rs can time it
// in its own process, its rounds alternating with qjson's: on a shared
// machine two programs run one after the other meet different neighbours,
// and their ratio moved from 0.8x to 1.6x from one run to the next.
// Built by tools/bench.sh (into target/simdjson/libsimdjson_shim.so) from
// the amalgamation the baselines come with; what is timed is what
// ../shared/baselines/sjbench.cpp times.
//
//   stage 1  ondemand::parser::iterate (structural index, UTF-8 validation)
//   DOM      dom::parser::parse (the full validating parse into its tape)
#include "simdjson.h"

#include <cstddef>
#include <new>

namespace {

struct Parsers {
  simdjson::padded_string json;
  simdjson::ondemand::parser ondemand;
  simdjson::dom::parser dom;
  Parsers(const char *bytes, size_t len) : json(bytes, len) {}
};

}  // namespace

extern "C" {

// Parsers of `len` bytes at `bytes` (copied, with simdjson's padding) for
// simdjson's kernel `kernel` ("haswell", "icelake", "fallback", ...), made
// the active one: NULL when this CPU lacks it or the text is rejected. The
// parsers keep their kernel whatever becomes active later.
void *qjson_simdjson_open(const char *kernel, const char *bytes, size_t len) {
  const simdjson::implementation *impl = simdjson::get_available_implementations()[kernel];
  if (impl == nullptr || !impl->supported_by_runtime_system()) return nullptr;
  simdjson::get_active_implementation() = impl;
  Parsers *p = new (std::nothrow) Parsers(bytes, len);
  if (p == nullptr) return nullptr;
  // The first parse of each allocates under the active kernel.
  simdjson::dom::element root;
  auto doc = p->ondemand.iterate(p->json);
  if (doc.error() || p->dom.parse(p->json).get(root)) {
    delete p;
    return nullptr;
  }
  return p;
}

// Stage 1 of the text: 0 when it is accepted.
int qjson_simdjson_stage1(void *parsers) {
  Parsers *p = static_cast<Parsers *>(parsers);
  auto doc = p->ondemand.iterate(p->json);
  return doc.error() ? 1 : 0;
}

// The DOM parse of the text: 0 when it is accepted.
int qjson_simdjson_dom(void *parsers) {
  Parsers *p = static_cast<Parsers *>(parsers);
  simdjson::dom::element root;
  return p->dom.parse(p->json).get(root) ? 1 : 0;
}

// How many structurals simdjson's stage 1 indexed in the text (after a
// DOM parse of it): what tools/stage1_insns.sh sets beside qjson's entries.
size_t qjson_simdjson_structurals(void *parsers) {
  Parsers *p = static_cast<Parsers *>(parsers);
  simdjson::dom::element root;
  if (p->dom.parse(p->json).get(root)) return 0;
  return p->dom.implementation->n_structural_indexes;
}

void qjson_simdjson_close(void *parsers) { delete static_cast<Parsers *>(parsers); }

}  // extern "C"
