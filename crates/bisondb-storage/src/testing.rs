//! Helpers for this crate's unit tests.

use std::path::Path;

use crate::lsm::{LsmEngine, LsmOptions};
use crate::store::{Collection, ValidateOptions};
use bisondb_engine::EngineError;

/// `f` again while it fails with `DbPathInUse`, for up to two seconds. The
/// crash tests spawn children of this test binary, and between fork and exec a
/// child holds a copy of every descriptor, the dbpath lock of an engine that
/// another test has just dropped among them: that dbpath looks locked for
/// that moment (seen once in CI, on a loaded machine).
pub(crate) fn retry_in_use<T>(f: impl Fn() -> Result<T, EngineError>) -> Result<T, EngineError> {
    for _ in 0..100 {
        match f() {
            Err(EngineError::DbPathInUse(_)) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
    f()
}

/// Opens (or reopens, right after the last engine on it was dropped) an lsm
/// engine on `dir`.
pub(crate) fn open_lsm(dir: &Path, options: LsmOptions) -> LsmEngine {
    retry_in_use(|| LsmEngine::open(dir, options.clone())).unwrap_or_else(|e| panic!("open: {e}"))
}

/// `validate` finds `c` consistent and has nothing to warn about: among other
/// things, its stats record (count, sizes, index entries) matches what is stored.
pub(crate) fn assert_validates_clean(c: &Collection) {
    let r = c
        .validate(ValidateOptions { repair: false })
        .unwrap_or_else(|e| panic!("validate: {e}"));
    assert!(r.valid() && r.warnings.is_empty(), "{r:?}");
}
