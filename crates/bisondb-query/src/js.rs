//! Server-side JavaScript (`$where`, `$function`, `$accumulator`): the
//! embedded engine of `bisondb-js` when the `js` feature is on (the server
//! turns it on), else stand-ins with the same signatures that refuse every
//! script, so a build without the JavaScript engine (the storage crate's,
//! which needs only index keys and bounds) fails those operators clearly.

#[cfg(feature = "js")]
pub(crate) use bisondb_js::{call_function, check_function, Predicate};

#[cfg(not(feature = "js"))]
pub(crate) use absent::{call_function, check_function, Predicate};

#[cfg(not(feature = "js"))]
mod absent {
    use bisondb_error::{ErrorCode, MongoError, MongoResult};
    use bson::RawDocument;

    fn unavailable() -> MongoError {
        MongoError::new(
            ErrorCode::JSInterpreterFailure,
            "server-side JavaScript is not available: this build of BisonDB has no JavaScript engine",
        )
    }

    /// Never built: [`Predicate::compile`] always fails.
    #[derive(Debug, Clone)]
    pub(crate) struct Predicate(());

    impl Predicate {
        pub(crate) fn compile(_code: &str) -> MongoResult<Predicate> {
            Err(unavailable())
        }

        pub(crate) fn matches(&self, _doc: &RawDocument) -> MongoResult<bool> {
            Err(unavailable())
        }
    }

    pub(crate) fn call_function(_body: &str, _args: &[bson::Bson]) -> MongoResult<bson::Bson> {
        Err(unavailable())
    }

    pub(crate) fn check_function(_body: &str) -> MongoResult<()> {
        Err(unavailable())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn every_script_is_refused() {
            let e = Predicate::compile("return true").err();
            assert_eq!(e.map(|e| e.code), Some(ErrorCode::JSInterpreterFailure));
            assert!(check_function("function() {}").is_err());
            assert!(call_function("function() {}", &[]).is_err());
        }
    }
}
