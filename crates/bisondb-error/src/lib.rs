//! MongoDB error codes and the one error type that crosses crate boundaries.
//!
//! Every error a client can see carries mongod's numeric `code` and its `codeName`.
//! The table below is the single place those pairs live, so a reply can never
//! pair a code with the wrong name. Crates below the server (query, storage)
//! produce [`MongoError`] values directly; the server turns them into reply
//! documents.

use std::fmt;

pub mod interrupt;
pub mod memory;

macro_rules! error_codes {
    ($( $variant:ident = $code:literal ),* $(,)?) => {
        /// A MongoDB error code, named as mongod names it (`codeName`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $variant, )*
            /// A code this table does not name (for example a numeric code taken from
            /// a client's failpoint). Its name is reported as `Location<code>`.
            Other(i32),
        }

        impl ErrorCode {
            /// The numeric code as mongod sends it.
            pub fn code(self) -> i32 {
                match self {
                    $( ErrorCode::$variant => $code, )*
                    ErrorCode::Other(c) => c,
                }
            }

            /// The `codeName` mongod sends with this code.
            pub fn name(self) -> std::borrow::Cow<'static, str> {
                match self {
                    $( ErrorCode::$variant => std::borrow::Cow::Borrowed(stringify!($variant)), )*
                    ErrorCode::Other(c) => std::borrow::Cow::Owned(format!("Location{c}")),
                }
            }

            /// Looks a numeric code up in the table.
            pub fn from_code(code: i32) -> ErrorCode {
                match code {
                    $( $code => ErrorCode::$variant, )*
                    c => ErrorCode::Other(c),
                }
            }
        }

        /// The table as written, in order, for the test that keeps it sorted.
        #[cfg(test)]
        const TABLE: &[(&str, i32)] = &[$( (stringify!($variant), $code) ),*];
    };
}

// Codes and names as in mongod's src/mongo/base/error_codes.yml, sorted by code
// (the `table_is_sorted_and_unique` test checks). Codes marked `failCommand` are
// here because drivers' tests make the failCommand fail point return them, so
// the reply's codeName is mongod's.
error_codes! {
    InternalError = 1,
    BadValue = 2,
    NoSuchKey = 4,
    HostUnreachable = 6, // failCommand
    HostNotFound = 7, // failCommand
    UnknownError = 8,
    FailedToParse = 9,
    UserNotFound = 11,
    Unauthorized = 13,
    TypeMismatch = 14,
    Overflow = 15,
    InvalidLength = 16,
    ProtocolError = 17,
    AuthenticationFailed = 18,
    IllegalOperation = 20,
    EmptyArrayOperation = 21,
    InvalidBSON = 22,
    AlreadyInitialized = 23,
    LockTimeout = 24,
    NamespaceNotFound = 26,
    IndexNotFound = 27,
    PathNotViable = 28,
    NonExistentPath = 29,
    InvalidPath = 30,
    RoleNotFound = 31,
    ConflictingUpdateOperators = 40,
    CursorNotFound = 43,
    NoMatchingDocument = 47,
    NamespaceExists = 48,
    MaxTimeMSExpired = 50,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    NotSingleValueField = 54,
    InvalidDBRef = 55,
    EmptyFieldName = 56,
    DottedFieldName = 57,
    CommandNotFound = 59,
    WriteConcernFailed = 64, // failCommand
    ImmutableField = 66,
    CannotCreateIndex = 67,
    IndexAlreadyExists = 68,
    InvalidOptions = 72,
    InvalidNamespace = 73,
    NodeNotFound = 74,
    NoReplicationEnabled = 76,
    UnknownReplWriteConcern = 79,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    NetworkTimeout = 89, // failCommand
    ShutdownInProgress = 91, // failCommand
    InvalidReplicaSetConfig = 93,
    NotYetInitialized = 94,
    NotSecondary = 95,
    OperationFailed = 96,
    DBPathInUse = 98,
    UnsatisfiableWriteConcern = 100,
    NewReplicaSetConfigurationIncompatible = 103,
    WriteConflict = 112, // failCommand
    CommandNotSupported = 115,
    ConflictingOperationInProgress = 117,
    DocumentValidationFailure = 121,
    NotAReplicaSet = 123,
    CommandFailed = 125,
    AmbiguousIndexKeyPattern = 132,
    CappedPositionLost = 136,
    JSInterpreterFailure = 139,
    ExceededMemoryLimit = 146,
    IncompatibleCollationVersion = 161,
    CommandNotSupportedOnView = 166,
    OptionNotSupportedOnView = 167,
    InvalidPipelineOperator = 168,
    CannotIndexParallelArrays = 171,
    QueryPlanKilled = 175,
    IncompatibleServerVersion = 177,
    GraphContainsCycle = 180,
    ViewDepthLimitExceeded = 182,
    PrimarySteppedDown = 189, // failCommand
    InvalidIndexSpecificationOption = 197,
    CannotBuildIndexKeys = 201,
    TimeProofMismatch = 204, // a client's $clusterTime signature
    InvalidUUID = 207,
    KeyNotFound = 211, // no signing key of that id for that time
    IncompleteTransactionHistory = 217,
    QueryFeatureNotAllowed = 224,
    TransactionTooOld = 225,
    NotImplemented = 238,
    SnapshotTooOld = 239,
    ConversionFailure = 241,
    NoSuchTransaction = 251,
    TransactionCommitted = 256,
    InvalidResumeToken = 260,
    ExceededTimeLimit = 262, // failCommand
    OperationNotSupportedInTransaction = 263,
    FailPointSetFailed = 266, // configureFailPoint's own error
    ClientDisconnect = 279,
    ChangeStreamFatalError = 280,
    ChangeStreamHistoryLost = 286,
    NoQueryExecutionPlans = 291,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    APIVersionError = 322,
    APIStrictError = 323,
    APIDeprecationError = 324,
    MechanismUnavailable = 334,
    UnsupportedOpQueryCommand = 352,
    CannotConvertIndexToUnique = 359,
    SocketException = 9001, // failCommand
    NotWritablePrimary = 10107, // failCommand
    BSONObjectTooLarge = 10334,
    DuplicateKey = 11000,
    InterruptedAtShutdown = 11600,
    Interrupted = 11601,
    InterruptedDueToReplStateChange = 11602, // failCommand
    NotPrimaryNoSecondaryOk = 13435, // failCommand
    NotPrimaryOrSecondary = 13436, // failCommand
    OutOfDiskSpace = 14031,
    Location15974 = 15974,
    Location16020 = 16020,
    Location17276 = 17276,
    Location31253 = 31253,
    Location31254 = 31254,
    Location40324 = 40324,
    Location40352 = 40352,
    ClientMarkedKilled = 46841,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.code())
    }
}

/// An error a client may see: mongod's code, its name, and a message.
///
/// `Internal` errors are bugs in BisonDB, not the client's fault; they still
/// become an `InternalError` reply rather than a panic.
#[derive(Debug, Clone, PartialEq)]
pub struct MongoError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra fields of the error reply beside code and message, as the bytes of
    /// a BSON document: a duplicate key's `keyPattern` and `keyValue`. Bytes
    /// rather than a document type keep this crate free of dependencies.
    pub details: Option<Vec<u8>>,
}

impl MongoError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        MongoError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The same error with extra reply fields (the bytes of a BSON document).
    pub fn with_details(mut self, bson_document: Vec<u8>) -> Self {
        self.details = Some(bson_document);
        self
    }

    /// Code 2, `BadValue`.
    pub fn bad_value(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadValue, message)
    }

    /// Code 14, `TypeMismatch`.
    pub fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TypeMismatch, message)
    }

    /// Code 9, `FailedToParse`.
    pub fn failed_to_parse(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedToParse, message)
    }

    /// Code 1, `InternalError`: an invariant of BisonDB was broken. Report it as a bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::InternalError,
            format!(
                "BisonDB internal error (please report this bug): {}",
                message.into()
            ),
        )
    }

    /// A numbered location error (`Location<code>`), as mongod uses for many parse errors.
    pub fn location(code: i32, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::from_code(code), message)
    }
}

impl fmt::Display for MongoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.code(),
            self.message
        )
    }
}

impl std::error::Error for MongoError {}

/// Result alias used across the crates.
pub type MongoResult<T> = Result<T, MongoError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_mongod() {
        assert_eq!(ErrorCode::BadValue.code(), 2);
        assert_eq!(ErrorCode::BadValue.name(), "BadValue");
        assert_eq!(ErrorCode::from_code(11000), ErrorCode::DuplicateKey);
        assert_eq!(ErrorCode::from_code(59).name(), "CommandNotFound");
        assert_eq!(ErrorCode::from_code(123456).name(), "Location123456");
        assert_eq!(ErrorCode::Location40324.name(), "Location40324");
    }

    #[test]
    fn codes_are_unique() {
        let all = (0..100_000)
            .map(ErrorCode::from_code)
            .filter(|c| !matches!(c, ErrorCode::Other(_)));
        let mut seen = std::collections::HashSet::new();
        for c in all {
            assert!(seen.insert(c), "duplicate {c}");
        }
    }

    #[test]
    fn table_is_sorted_and_unique() {
        for pair in TABLE.windows(2) {
            let [(a, ac), (b, bc)] = pair else {
                unreachable!("windows(2) yields pairs")
            };
            assert!(
                ac < bc,
                "the error table must be sorted by code without duplicates: {a} = {ac} comes before {b} = {bc}"
            );
        }
        let mut names = std::collections::HashSet::new();
        for (name, _) in TABLE {
            assert!(names.insert(name), "duplicate name {name}");
        }
    }
}
