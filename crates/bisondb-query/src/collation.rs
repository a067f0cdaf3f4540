//! MongoDB collations: parsing a `collation` document the way mongod does and
//! comparing strings with the Unicode Collation Algorithm.
//!
//! The algorithm and the CLDR tailorings come from ICU4X (`icu_collator` with
//! its compiled data); this module only maps mongod's options onto ICU4X's and
//! validates input with mongod's error codes. The simple collation
//! (`{locale: "simple"}`, or none at all) is represented by `None` everywhere:
//! callers keep their plain byte comparison, so the default path costs nothing.
//!
//! Collation only changes how strings (and symbols) compare; every other type
//! keeps its BSON order, which is why the collation-aware comparison functions in
//! [`crate::compare`] take an `Option<&Collation>` and consult it only for
//! strings.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use icu_locale_core::Locale;

/// The ICU version mongod reports in a resolved collation (`version`); mongod
/// 8 still bundles ICU 57.1, and drivers and tests compare against that string.
const ICU_VERSION: &str = "57.1";

/// Locales mongod accepts ("Collation Locales and Default Parameters" in the
/// manual), as ICU locale IDs, each with the `@collation=` variants it allows.
/// Sorted by locale ID so it can be binary searched.
const LOCALES: &[(&str, &[&str])] = &[
    ("af", &[]),
    ("am", &[]),
    ("ar", &["compat"]),
    ("as", &[]),
    ("az", &["search"]),
    ("be", &[]),
    ("bg", &[]),
    ("bn", &["traditional"]),
    ("bo", &[]),
    ("bs", &["search"]),
    ("bs_Cyrl", &[]),
    ("ca", &["search"]),
    ("chr", &[]),
    ("cs", &["search"]),
    ("cy", &[]),
    ("da", &["search"]),
    ("de", &["eor", "phonebook", "search"]),
    ("de_AT", &["phonebook"]),
    ("dsb", &[]),
    ("dz", &[]),
    ("ee", &[]),
    ("el", &[]),
    ("en", &[]),
    ("en_US", &[]),
    ("en_US_POSIX", &[]),
    ("eo", &[]),
    ("es", &["search", "traditional"]),
    ("et", &[]),
    ("fa", &[]),
    ("fa_AF", &[]),
    ("fi", &["search", "traditional"]),
    ("fil", &[]),
    ("fo", &[]),
    ("fr", &[]),
    ("fr_CA", &[]),
    ("ga", &[]),
    ("gl", &["search"]),
    ("gu", &[]),
    ("ha", &[]),
    ("haw", &[]),
    ("he", &["search"]),
    ("hi", &["search"]),
    ("hr", &["search"]),
    ("hsb", &[]),
    ("hu", &[]),
    ("hy", &[]),
    ("id", &[]),
    ("ig", &[]),
    ("is", &["search"]),
    ("it", &[]),
    ("ja", &["unihan"]),
    ("ka", &[]),
    ("kk", &[]),
    ("kl", &["search"]),
    ("km", &[]),
    ("kn", &["traditional"]),
    ("ko", &["search", "searchjl", "unihan"]),
    ("kok", &[]),
    ("ky", &[]),
    ("lb", &[]),
    ("lkt", &[]),
    ("ln", &["phonetic"]),
    ("lo", &[]),
    ("lt", &[]),
    ("lv", &[]),
    ("mk", &[]),
    ("ml", &[]),
    ("mn", &[]),
    ("mr", &[]),
    ("ms", &[]),
    ("mt", &[]),
    ("my", &[]),
    ("nb", &["search"]),
    ("ne", &[]),
    ("nl", &[]),
    ("nn", &["search"]),
    ("om", &[]),
    ("or", &[]),
    ("pa", &[]),
    ("pl", &[]),
    ("ps", &[]),
    ("pt", &[]),
    ("ro", &[]),
    ("ru", &[]),
    ("se", &["search"]),
    ("si", &["dictionary"]),
    ("sk", &["search"]),
    ("sl", &[]),
    ("smn", &["search"]),
    ("sq", &[]),
    ("sr", &[]),
    ("sr_Latn", &["search"]),
    ("sv", &["search"]),
    ("sw", &[]),
    ("ta", &[]),
    ("te", &[]),
    ("th", &[]),
    ("to", &[]),
    ("tr", &["search"]),
    ("ug", &[]),
    ("uk", &[]),
    ("ur", &[]),
    ("vi", &["traditional"]),
    ("wae", &[]),
    ("yi", &["search"]),
    ("yo", &[]),
    ("zh", &["big5han", "gb2312han", "unihan", "zhuyin"]),
    ("zh_Hant", &[]),
    ("zu", &[]),
];

/// ICU collation variant names (`@collation=...`) and their BCP 47 `-u-co-`
/// spellings, which is what ICU4X locales take.
const VARIANT_BCP47: &[(&str, &str)] = &[
    ("big5han", "big5han"),
    ("compat", "compat"),
    ("dictionary", "dict"),
    ("eor", "eor"),
    ("gb2312han", "gb2312"),
    ("phonebook", "phonebk"),
    ("phonetic", "phonetic"),
    ("search", "search"),
    ("searchjl", "searchjl"),
    ("traditional", "trad"),
    ("unihan", "unihan"),
    ("zhuyin", "zhuyin"),
];

/// Locales whose ICU default turns normalization on (reported in the resolved
/// spec only: ICU4X always normalizes, which gives the same order).
const NORMALIZING_LOCALES: &[&str] = &["as", "bn", "my", "vi"];

/// A non-simple collation: its resolved specification and the ICU4X collator.
pub struct Collation {
    spec: Document,
    collator: CollatorBorrowed<'static>,
}

impl fmt::Debug for Collation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Collation({})", self.spec)
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Collation) -> bool {
        self.spec == other.spec
    }
}

/// Options as given, before locale defaults are applied.
#[derive(Default)]
struct Given {
    case_level: Option<bool>,
    case_first: Option<&'static str>,
    strength: Option<i64>,
    numeric: Option<bool>,
    alternate: Option<&'static str>,
    max_variable: Option<&'static str>,
    normalization: Option<bool>,
    backwards: Option<bool>,
}

fn failed_to_parse(msg: String) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, msg)
}

fn type_mismatch(field: &str, want: &str, got: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "\"{field}\" had the wrong type. Expected {want}, found {}",
            crate::value::type_name(got)
        ),
    )
}

fn get_bool(field: &str, v: &Bson) -> MongoResult<bool> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        other => Err(type_mismatch(field, "bool", other)),
    }
}

fn get_str<'a>(field: &str, v: &'a Bson) -> MongoResult<&'a str> {
    match v {
        Bson::String(s) => Ok(s),
        other => Err(type_mismatch(field, "string", other)),
    }
}

/// One of `choices` (static so the parsed value can be kept without a copy).
fn pick(field: &str, s: &str, choices: &[&'static str]) -> MongoResult<&'static str> {
    choices.iter().copied().find(|c| *c == s).ok_or_else(|| {
        let list = match choices {
            [a, b] => format!("'{a}' or '{b}'"),
            [a, b, c] => format!("'{a}', '{b}', or '{c}'"),
            _ => choices.join(", "),
        };
        failed_to_parse(format!("Field '{field}' must be {list}. Got: {s}"))
    })
}

/// `strength`: any number with an exactly integral value 1..=5 (mongod's
/// `bsonExtractIntegerField`).
fn get_strength(v: &Bson) -> MongoResult<i64> {
    let n = match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) => {
            if d.fract() != 0.0 || !d.is_finite() || d.abs() > 9.0e18 {
                return Err(MongoError::bad_value(format!(
                    "Expected field \"strength\" to have a value exactly representable as a 64-bit integer, but found strength: {d}"
                )));
            }
            Some(*d as i64)
        }
        Bson::Decimal128(d) => d.to_string().parse::<i64>().ok(),
        other => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "Expected field \"strength\" to have numeric type, but found {}",
                    crate::value::type_name(other)
                ),
            ))
        }
    };
    match n {
        Some(n @ 1..=5) => Ok(n),
        Some(n) => Err(failed_to_parse(format!(
            "Field 'strength' must be an integer 1 through 5. Got: {n}"
        ))),
        None => Err(MongoError::bad_value(format!(
            "Expected field \"strength\" to have a value exactly representable as a 64-bit integer, but found strength: {v}"
        ))),
    }
}

/// Splits an ICU locale ID into its base (`de_AT`) and `@collation=` variant.
/// Any other keyword, or a malformed keyword list, makes the locale invalid.
fn split_locale(id: &str) -> Option<(&str, Option<&str>)> {
    match id.split_once('@') {
        None => Some((id, None)),
        Some((base, kw)) => {
            let v = kw.strip_prefix("collation=")?;
            (!v.is_empty() && !v.contains([';', '=', '@'])).then_some((base, Some(v)))
        }
    }
}

/// The ICU4X locale for a validated ICU locale ID.
fn icu4x_locale(base: &str, variant: Option<&str>) -> Option<Locale> {
    let mut tag = match base {
        // The POSIX variant is ICU's "computer" English: the root order with
        // case-first upper. ICU4X has no such tailoring; the caller sets it.
        "en_US_POSIX" => "en-US".to_string(),
        other => other.replace('_', "-"),
    };
    if let Some(v) = variant {
        let co = VARIANT_BCP47.iter().find(|(icu, _)| *icu == v)?.1;
        tag.push_str("-u-co-");
        tag.push_str(co);
    }
    Locale::try_from_str(&tag).ok()
}

impl Collation {
    /// Parses a `collation` document. `Ok(None)` is the simple collation.
    ///
    /// Errors follow mongod's collator factory: a missing `locale` is
    /// NoSuchKey, a field of the wrong type TypeMismatch, a bad enumerated
    /// value or an unknown field FailedToParse, an unknown locale or an
    /// invalid combination of options BadValue.
    pub fn parse(spec: &Document) -> MongoResult<Option<Arc<Collation>>> {
        let locale = match spec.get("locale") {
            None => {
                return Err(MongoError::new(
                    ErrorCode::NoSuchKey,
                    "Missing expected field \"locale\"",
                ))
            }
            Some(v) => get_str("locale", v)?,
        };
        if locale.contains('\0') {
            return Err(MongoError::bad_value(format!(
                "Field 'locale' cannot contain null byte. Collation spec: {spec}"
            )));
        }
        if locale == "simple" {
            if spec.len() > 1 {
                return Err(failed_to_parse(format!(
                    "If locale=simple, no other fields should be present in: {spec}"
                )));
            }
            return Ok(None);
        }
        if locale.is_empty() {
            return Err(MongoError::bad_value(format!(
                "Field 'locale' cannot be the empty string in: {spec}"
            )));
        }
        let mut given = Given::default();
        for (k, v) in spec {
            match k.as_str() {
                "locale" => {}
                "caseLevel" => given.case_level = Some(get_bool(k, v)?),
                "caseFirst" => {
                    given.case_first = Some(pick(k, get_str(k, v)?, &["upper", "lower", "off"])?)
                }
                "strength" => given.strength = Some(get_strength(v)?),
                "numericOrdering" => given.numeric = Some(get_bool(k, v)?),
                "alternate" => {
                    given.alternate = Some(pick(k, get_str(k, v)?, &["non-ignorable", "shifted"])?)
                }
                "maxVariable" => {
                    given.max_variable = Some(pick(k, get_str(k, v)?, &["punct", "space"])?)
                }
                "normalization" => given.normalization = Some(get_bool(k, v)?),
                "backwards" => given.backwards = Some(get_bool(k, v)?),
                "version" => {
                    let want = get_str(k, v)?;
                    if want != ICU_VERSION {
                        return Err(MongoError::new(
                            ErrorCode::IncompatibleCollationVersion,
                            format!(
                                "Requested collation version {want} but the only available collator version was {ICU_VERSION}. Requested collation spec: {spec}"
                            ),
                        ));
                    }
                }
                _ => {
                    return Err(failed_to_parse(format!(
                        "Collation spec contains unknown field. Collation spec: {spec}"
                    )))
                }
            }
        }
        let invalid_locale =
            || MongoError::bad_value(format!("Field 'locale' is invalid in: {spec}"));
        let (base, variant) = split_locale(locale).ok_or_else(invalid_locale)?;
        let allowed = LOCALES
            .binary_search_by(|(l, _)| l.cmp(&base))
            .ok()
            .and_then(|i| LOCALES.get(i))
            .ok_or_else(invalid_locale)?;
        if variant.is_some_and(|v| !allowed.1.contains(&v)) {
            return Err(invalid_locale());
        }
        let icu_locale = icu4x_locale(base, variant).ok_or_else(invalid_locale)?;
        Self::build(locale, base, &icu_locale, &given, spec)
    }

    fn build(
        locale: &str,
        base: &str,
        icu_locale: &Locale,
        given: &Given,
        spec: &Document,
    ) -> MongoResult<Option<Arc<Collation>>> {
        let mut prefs = CollatorPreferences::from(icu_locale);
        prefs.case_first = match given.case_first {
            Some("upper") => Some(CollationCaseFirst::Upper),
            Some("lower") => Some(CollationCaseFirst::Lower),
            Some(_) => Some(CollationCaseFirst::False),
            None if base == "en_US_POSIX" => Some(CollationCaseFirst::Upper),
            None => None,
        };
        prefs.numeric_ordering = given.numeric.map(|n| {
            if n {
                CollationNumericOrdering::True
            } else {
                CollationNumericOrdering::False
            }
        });
        let mut options = CollatorOptions::default();
        options.strength = given.strength.map(|s| match s {
            1 => Strength::Primary,
            2 => Strength::Secondary,
            3 => Strength::Tertiary,
            4 => Strength::Quaternary,
            _ => Strength::Identical,
        });
        options.case_level = given
            .case_level
            .map(|c| if c { CaseLevel::On } else { CaseLevel::Off });
        options.alternate_handling = given.alternate.map(|a| {
            if a == "shifted" {
                AlternateHandling::Shifted
            } else {
                AlternateHandling::NonIgnorable
            }
        });
        options.max_variable = given.max_variable.map(|m| {
            if m == "space" {
                MaxVariable::Space
            } else {
                MaxVariable::Punctuation
            }
        });
        let collator = CollatorBorrowed::try_new(prefs, options).map_err(|e| {
            MongoError::new(
                ErrorCode::OperationFailed,
                format!("Failed to create collator: {e}. Collation spec: {spec}"),
            )
        })?;
        let r = collator.resolved_options();
        // ICU4X fixes backward secondary weights by locale (only fr_CA has
        // them); mongod lets any locale switch them. The locale's own value is
        // accepted, the other one is not implemented.
        let locale_backwards = base == "fr_CA";
        if let Some(b) = given.backwards {
            if b != locale_backwards {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!(
                        "collation option backwards: {b} with locale '{locale}' is not supported by BisonDB yet"
                    ),
                ));
            }
        }
        let strength: i32 = match r.strength {
            Strength::Primary => 1,
            Strength::Secondary => 2,
            Strength::Tertiary => 3,
            Strength::Quaternary => 4,
            _ => 5,
        };
        let case_level = r.case_level == CaseLevel::On;
        let case_first = match r.case_first {
            CollationCaseFirst::Upper => "upper",
            CollationCaseFirst::Lower => "lower",
            _ => "off",
        };
        if locale_backwards && given.backwards.is_some() && strength == 1 {
            return Err(MongoError::bad_value(format!(
                "'backwards' is invalid with 'strength' of 1 in: {spec}"
            )));
        }
        if case_first != "off" && !case_level && strength < 3 && given.case_first.is_some() {
            return Err(MongoError::bad_value(format!(
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than 2 in: {spec}"
            )));
        }
        let resolved = doc! {
            "locale": locale,
            "caseLevel": case_level,
            "caseFirst": case_first,
            "strength": strength,
            "numericOrdering": r.numeric == CollationNumericOrdering::True,
            "alternate": if r.alternate_handling == AlternateHandling::Shifted { "shifted" } else { "non-ignorable" },
            "maxVariable": if r.max_variable == MaxVariable::Space { "space" } else { "punct" },
            "normalization": given.normalization.unwrap_or_else(|| NORMALIZING_LOCALES.contains(&base)),
            "backwards": locale_backwards,
            "version": ICU_VERSION,
        };
        Ok(Some(Arc::new(Collation {
            spec: resolved,
            collator,
        })))
    }

    /// The resolved specification, every option filled in, as mongod reports
    /// it in `listCollections`, `listIndexes` and `explain`.
    pub fn spec(&self) -> &Document {
        &self.spec
    }

    /// Compares two strings under this collation.
    pub fn compare_str(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// Appends the collation sort key of `s`: two strings get the same key
    /// exactly when they compare equal (used for `$group` and set keys).
    pub fn write_key(&self, s: &str, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = self.collator.write_sort_key_to(s, out);
    }
}

impl Collation {
    /// The string an index with this collation stores for `s`: its sort key,
    /// one character per byte (U+0001..=U+0100). UTF-8 keeps code point order,
    /// so the byte order of these strings, which index keys compare, is the
    /// collation's order, and strings the collation finds equal get one key.
    pub fn index_key(&self, s: &str) -> String {
        let mut key = Vec::new();
        self.write_key(s, &mut key);
        key.into_iter()
            .map(|b| char::from_u32(u32::from(b) + 1).unwrap_or('\u{1}'))
            .collect()
    }

    /// `v` with every string (and symbol) replaced by its [`Collation::index_key`],
    /// at any depth: what an index with this collation holds, and what its
    /// bounds are built from.
    pub fn index_value(&self, v: &Bson) -> Bson {
        match v {
            Bson::String(s) | Bson::Symbol(s) => Bson::String(self.index_key(s)),
            Bson::Array(a) => Bson::Array(a.iter().map(|x| self.index_value(x)).collect()),
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, x)| (k.clone(), self.index_value(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Parses an optional `collation` value of a command (`None` when absent).
/// The simple collation also yields `None`.
pub fn parse_opt(v: Option<&Document>) -> MongoResult<Option<Arc<Collation>>> {
    match v {
        Some(d) => Collation::parse(d),
        None => Ok(None),
    }
}

/// Whether two optional collations are the same (both simple, or the same
/// resolved spec).
pub fn same(a: Option<&Collation>, b: Option<&Collation>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
