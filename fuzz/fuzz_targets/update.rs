#![no_main]
//! libFuzzer entry for the `update` target of `bisondb_fuzz::targets`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(t) = bisondb_fuzz::target("update") {
        (t.run)(data)
    }
});
