#![no_main]
//! libFuzzer entry for the `pipeline` target of `bisondb_fuzz::targets`.
/// The server's allocator, as in the stable driver (`bisondb-fuzz`'s main).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(t) = bisondb_fuzz::target("pipeline") {
        (t.run)(data)
    }
});
