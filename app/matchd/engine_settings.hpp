#pragma once

// matchd's options as the engine's settings: sessions, directory,
// lifecycle, broker, relay and worker pools (the stores, the cluster and
// the failpoints are matchd.cpp's, which checks them as it goes).

namespace mm {

struct engine_config;
struct matchd_config;

/// Copies the engine's plain settings of `mc` into `ec`. Idempotent.
void engine_settings_of(const matchd_config& mc, engine_config& ec);

} // namespace mm
