//! Text search as mongod's text indexes (`textIndexVersion` 3) do it: the
//! index specification (`weights`, `default_language`, `language_override`),
//! the tokenizer (Unicode delimiters, case folding, diacritic removal, stop
//! words, Snowball stemming), the terms and scores a document puts in a text
//! index, and the `$text` query (`$search` terms, "phrases", -negations) with
//! its per-document match and `textScore`.
//!
//! Pure logic: the storage crate turns [`TextSpec::term_scores`] into index
//! entries, the planner looks up [`TextQuery::terms_for_bounds`] in them, and
//! [`BoundText`] re-checks and scores each fetched document.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};
use icu_normalizer::DecomposingNormalizerBorrowed;
use icu_properties::props::{
    Dash, Diacritic, Hyphen, PatternSyntax, QuotationMark, SentenceTerminal, TerminalPunctuation,
    WhiteSpace,
};
use icu_properties::CodePointSetData;
use rust_stemmers::{Algorithm, Stemmer};

use crate::compare::number_as_f64;

mod scores;
pub use scores::{ScoresById, TextScoreSource};

/// The only text index version BisonDB builds (mongod's default since 3.2).
pub const TEXT_INDEX_VERSION: i32 = 3;
/// mongod's bound on a field's weight (exclusive).
const MAX_WORD_WEIGHT: i64 = 100_000;
/// The weights key standing for "every string field" (`{"$**": "text"}`).
pub const WILDCARD: &str = "$**";

/// A language of text index version 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    None,
    Danish,
    Dutch,
    English,
    Finnish,
    French,
    German,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Turkish,
}

/// (name, two-letter alias, language), as mongod registers them.
const LANGUAGES: &[(&str, &str, Language)] = &[
    ("danish", "da", Language::Danish),
    ("dutch", "nl", Language::Dutch),
    ("english", "en", Language::English),
    ("finnish", "fi", Language::Finnish),
    ("french", "fr", Language::French),
    ("german", "de", Language::German),
    ("hungarian", "hu", Language::Hungarian),
    ("italian", "it", Language::Italian),
    ("norwegian", "nb", Language::Norwegian),
    ("portuguese", "pt", Language::Portuguese),
    ("romanian", "ro", Language::Romanian),
    ("russian", "ru", Language::Russian),
    ("spanish", "es", Language::Spanish),
    ("swedish", "sv", Language::Swedish),
    ("turkish", "tr", Language::Turkish),
];

impl Language {
    /// A language by its name or two-letter code, exactly as mongod accepts
    /// them for version 3 (case-sensitive).
    pub fn parse(name: &str) -> Option<Language> {
        if name == "none" {
            return Some(Language::None);
        }
        LANGUAGES
            .iter()
            .find(|(n, a, _)| *n == name || *a == name)
            .map(|(_, _, l)| *l)
    }

    /// mongod's error for a language it does not know.
    pub fn unsupported(name: &str) -> MongoError {
        MongoError::bad_value(format!(
            "unsupported language: \"{name}\" for text index version {TEXT_INDEX_VERSION}"
        ))
    }

    /// The canonical name (`"english"`).
    pub fn name(self) -> &'static str {
        LANGUAGES
            .iter()
            .find(|(_, _, l)| *l == self)
            .map_or("none", |(n, _, _)| n)
    }

    fn stemmer(self) -> Option<Algorithm> {
        Some(match self {
            Language::None => return None,
            Language::Danish => Algorithm::Danish,
            Language::Dutch => Algorithm::Dutch,
            Language::English => Algorithm::English,
            Language::Finnish => Algorithm::Finnish,
            Language::French => Algorithm::French,
            Language::German => Algorithm::German,
            Language::Hungarian => Algorithm::Hungarian,
            Language::Italian => Algorithm::Italian,
            Language::Norwegian => Algorithm::Norwegian,
            Language::Portuguese => Algorithm::Portuguese,
            Language::Romanian => Algorithm::Romanian,
            Language::Russian => Algorithm::Russian,
            Language::Spanish => Algorithm::Spanish,
            Language::Swedish => Algorithm::Swedish,
            Language::Turkish => Algorithm::Turkish,
        })
    }

    /// The code of Snowball's stop-word list for the language in `stop-words`.
    fn stop_list_code(self) -> Option<&'static str> {
        Some(match self {
            Language::None => return None,
            Language::Danish => "da",
            Language::Dutch => "nl",
            Language::English => "en",
            Language::Finnish => "fi",
            Language::French => "fr",
            Language::German => "de",
            Language::Hungarian => "hu",
            Language::Italian => "it",
            Language::Norwegian => "no",
            Language::Portuguese => "pt",
            Language::Romanian => "ro",
            Language::Russian => "ru",
            Language::Spanish => "es",
            Language::Swedish => "sv",
            Language::Turkish => "tr",
        })
    }

    fn is_stop_word(self, word: &str) -> bool {
        static SETS: OnceLock<BTreeMap<Language, HashSet<&'static str>>> = OnceLock::new();
        let sets = SETS.get_or_init(|| {
            LANGUAGES
                .iter()
                .filter_map(|(_, _, l)| {
                    let list = stop_words::lookup(l.stop_list_code()?)?;
                    Some((*l, list.iter().copied().collect()))
                })
                .collect()
        });
        sets.get(&self).is_some_and(|s| s.contains(word))
    }
}

/// Whether `c` separates words: Unicode's White_Space, Dash, Hyphen,
/// Quotation_Mark, Terminal_Punctuation, Pattern_Syntax and STerm characters,
/// except the apostrophe in English (so "don't" stays one word), as mongod.
fn is_delimiter(c: char, english: bool) -> bool {
    if c == '\'' {
        return !english;
    }
    CodePointSetData::new::<WhiteSpace>().contains(c)
        || CodePointSetData::new::<Dash>().contains(c)
        || CodePointSetData::new::<Hyphen>().contains(c)
        || CodePointSetData::new::<QuotationMark>().contains(c)
        || CodePointSetData::new::<TerminalPunctuation>().contains(c)
        || CodePointSetData::new::<PatternSyntax>().contains(c)
        || CodePointSetData::new::<SentenceTerminal>().contains(c)
}

/// Lower case; Turkish maps dotted and dotless I its own way.
fn fold_case(s: &str, turkish: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'I' if turkish => out.push('ı'),
            'İ' if turkish => out.push('i'),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// `s` without diacritics: combining marks dropped, and precomposed letters
/// replaced by their base letter (`é` → `e`).
fn strip_diacritics(s: &str) -> String {
    let nfd = DecomposingNormalizerBorrowed::new_nfd();
    let dia = CodePointSetData::new::<Diacritic>();
    let mut out = String::with_capacity(s.len());
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if c.is_ascii() {
            if !dia.contains(c) {
                out.push(c);
            }
            continue;
        }
        if dia.contains(c) {
            continue;
        }
        let decomposed = nfd.normalize(c.encode_utf8(&mut buf));
        let kept: String = decomposed.chars().filter(|d| !dia.contains(*d)).collect();
        if kept.chars().count() == decomposed.chars().count() {
            // Nothing was a diacritic (e.g. Hangul): keep the letter as it is.
            out.push(c);
        } else {
            out.push_str(&kept);
        }
    }
    out
}

/// How [`tokenize`] shapes its words.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenOptions {
    pub filter_stop_words: bool,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
}

/// The words of `text` in `lang`, as mongod's Unicode tokenizer makes them:
/// split at delimiters, lower-cased (unless case-sensitive), stop words left
/// out (when asked), stemmed, then diacritics removed (unless
/// diacritic-sensitive).
pub fn tokenize(text: &str, lang: Language, opts: TokenOptions) -> Vec<String> {
    let english = lang == Language::English;
    let turkish = lang == Language::Turkish;
    let stemmer = lang.stemmer().map(Stemmer::create);
    let mut out = Vec::new();
    for raw in text
        .split(|c: char| is_delimiter(c, english))
        .filter(|w| !w.is_empty())
    {
        let lower = fold_case(raw, turkish);
        if opts.filter_stop_words && lang.is_stop_word(&lower) {
            continue;
        }
        let word = if opts.case_sensitive {
            raw.to_string()
        } else {
            lower
        };
        let stemmed = match &stemmer {
            Some(s) => s.stem(&word).into_owned(),
            None => word,
        };
        out.push(if opts.diacritic_sensitive {
            stemmed
        } else {
            strip_diacritics(&stemmed)
        });
    }
    out
}

/// Whether `phrase` occurs in `text` (a substring, not a word sequence, as in
/// mongod), case- and diacritic-insensitively unless asked otherwise.
pub fn phrase_matches(
    phrase: &str,
    text: &str,
    lang: Language,
    case_sensitive: bool,
    diacritic_sensitive: bool,
) -> bool {
    let norm = |s: &str| {
        let s = if case_sensitive {
            s.to_string()
        } else {
            fold_case(s, lang == Language::Turkish)
        };
        if diacritic_sensitive {
            s
        } else {
            strip_diacritics(&s)
        }
    };
    norm(text).contains(&norm(phrase))
}

/// The per-term scores of one string with weight `weight`, added to
/// `scores` (mongod's `_scoreStringV2`): a term seen `n` times in a string of
/// `total` words scores `weight * (1 + 1/2 + ... + 1/2^(n-1)) * (0.5 * n /
/// total + 0.5)`, times 1.1 when the term is the whole string.
pub fn score_string(raw: &str, lang: Language, weight: f64, scores: &mut BTreeMap<String, f64>) {
    let words = tokenize(
        raw,
        lang,
        TokenOptions {
            filter_stop_words: true,
            ..TokenOptions::default()
        },
    );
    let total = words.len() as f64;
    // term -> (count, freq, exp)
    let mut terms: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for w in words {
        let e = terms.entry(w).or_insert((0.0, 0.0, 0.0));
        e.2 = if e.2 == 0.0 { 1.0 } else { e.2 * 2.0 };
        e.0 += 1.0;
        e.1 += 1.0 / e.2;
    }
    for (term, (count, freq, _)) in terms {
        let coeff = 0.5 * count / total + 0.5;
        let adjustment = if raw.len() == term.len() && raw.to_lowercase() == term.to_lowercase() {
            1.1
        } else {
            1.0
        };
        *scores.entry(term).or_insert(0.0) += weight * freq * coeff * adjustment;
    }
}

/// A text index's definition, read from its stored specification.
#[derive(Debug, Clone, PartialEq)]
pub struct TextSpec {
    /// Field path -> weight, without the wildcard.
    weights: BTreeMap<String, f64>,
    wildcard: bool,
    pub default_language: Language,
    pub language_override: String,
    /// Key pattern fields before and after the text part.
    pub prefix: Vec<String>,
    pub suffix: Vec<String>,
}

fn cannot_create(msg: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::CannotCreateIndex, msg)
}

/// Whether a key pattern makes a text index (a `"text"` value, or the stored
/// `_fts: "text"` form).
pub fn is_text_key(key: &Document) -> bool {
    key.values()
        .any(|v| matches!(v, Bson::String(s) if s == "text"))
}

/// A createIndexes specification of a text index, made into the form mongod
/// stores (its `fixSpec`): the key pattern with the text fields replaced by
/// `_fts: "text", _ftsx: 1`, and the options `weights` (sorted, integral),
/// `default_language`, `language_override` and `textIndexVersion`.
pub fn fix_spec(spec: &Document) -> MongoResult<(Document, Document)> {
    let key = spec
        .get_document("key")
        .map_err(|_| cannot_create("text index needs a key"))?;
    let mut weights: BTreeMap<String, i64> = BTreeMap::new();
    let mut fixed = Document::new();
    let mut added = false;
    // Prefix fields, then adjacent text fields, then suffix fields.
    let mut phase = 0;
    for (k, v) in key {
        if k == "_fts" || k == "_ftsx" {
            if k == "_fts" && !matches!(v, Bson::String(s) if s == "text") {
                return Err(cannot_create("expecting _fts:\"text\""));
            }
            if k == "_ftsx" && number_as_f64(v).map(|x| x as i64) != Some(1) {
                return Err(cannot_create("expecting _ftsx:1"));
            }
            if k == "_fts" {
                added = true;
                phase = 1;
            }
            fixed.insert(k.clone(), v.clone());
            continue;
        }
        match v {
            Bson::String(s) if s == "text" => {
                if phase == 2 {
                    return Err(cannot_create("'text' fields in index must all be adjacent"));
                }
                phase = 1;
                if !added {
                    fixed.insert("_fts", "text");
                    fixed.insert("_ftsx", 1i32);
                    added = true;
                }
                weights.insert(k.clone(), 1);
            }
            Bson::String(_) => {
                return Err(cannot_create(
                    "expected value 1 or -1 for non-text key in compound index",
                ))
            }
            other => {
                let n = number_as_f64(other).map(|x| x as i64);
                if n != Some(1) && n != Some(-1) {
                    return Err(cannot_create(
                        "expected value 1 or -1 for non-text key in compound index",
                    ));
                }
                if phase == 1 {
                    phase = 2;
                }
                fixed.insert(k.clone(), other.clone());
            }
        }
    }
    if !added {
        return Err(cannot_create("expected a text field in the key pattern"));
    }
    match spec.get("weights") {
        None => {}
        Some(Bson::Document(w)) => {
            for (k, v) in w {
                let Some(x) = number_as_f64(v) else {
                    return Err(cannot_create("weight for text index needs numeric type"));
                };
                weights.insert(k.clone(), x as i64);
            }
        }
        Some(Bson::String(s)) if s == WILDCARD => {
            weights.insert(WILDCARD.to_string(), 1);
        }
        Some(_) => {
            return Err(cannot_create(
                "text index option 'weights' must be an object",
            ))
        }
    }
    if weights.is_empty() {
        return Err(cannot_create(
            "text index option 'weights' must specify fields or the wildcard",
        ));
    }
    let mut w = Document::new();
    for (k, v) in &weights {
        if *v <= 0 || *v >= MAX_WORD_WEIGHT {
            return Err(cannot_create(format!(
                "text index weight must be in the exclusive interval (0,{MAX_WORD_WEIGHT}) but found: {v}"
            )));
        }
        if k != WILDCARD {
            if k.is_empty() {
                return Err(cannot_create("weight cannot be on an empty field"));
            }
            for part in k.split('.') {
                if part.is_empty() {
                    return Err(cannot_create("weight cannot have empty path component"));
                }
                if part.starts_with('$') {
                    return Err(cannot_create(
                        "weight cannot have path component with $ prefix",
                    ));
                }
            }
        }
        w.insert(k.clone(), i32::try_from(*v).unwrap_or(i32::MAX));
    }
    let default_language = match spec.get("default_language") {
        None => "english".to_string(),
        Some(Bson::String(s)) => s.clone(),
        Some(_) => return Err(cannot_create("default_language needs a string type")),
    };
    if Language::parse(&default_language).is_none() {
        return Err(cannot_create("default_language is not valid"));
    }
    let language_override = match spec.get("language_override") {
        None => "language".to_string(),
        Some(Bson::String(s)) => s.clone(),
        Some(_) => return Err(cannot_create("language_override must be a string")),
    };
    if language_override.is_empty()
        || language_override.starts_with('$')
        || language_override.contains('.')
    {
        return Err(cannot_create("language_override is not valid"));
    }
    match spec.get("textIndexVersion") {
        None => {}
        Some(v) => match number_as_f64(v) {
            None => {
                return Err(cannot_create(
                    "text index option 'textIndexVersion' must be a number",
                ))
            }
            Some(x) if x as i64 == i64::from(TEXT_INDEX_VERSION) => {}
            // Version 2 indexes (other tokenizer) are not built by BisonDB.
            Some(x) if x as i64 == 2 => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "text indexes of textIndexVersion 2 are not supported by BisonDB yet",
                ))
            }
            Some(x) => return Err(cannot_create(format!("bad textIndexVersion: {}", x as i64))),
        },
    }
    let options = bson::doc! {
        "weights": w,
        "default_language": default_language,
        "language_override": language_override,
        "textIndexVersion": TEXT_INDEX_VERSION,
    };
    Ok((fixed, options))
}

impl TextSpec {
    /// The definition of a stored text index (key `{..., _fts: "text", _ftsx:
    /// 1, ...}` and the options [`fix_spec`] made).
    pub fn from_stored(key: &Document, options: &Document) -> MongoResult<TextSpec> {
        let mut weights = BTreeMap::new();
        let mut wildcard = false;
        if let Ok(w) = options.get_document("weights") {
            for (k, v) in w {
                if k == WILDCARD {
                    wildcard = true;
                } else {
                    weights.insert(k.clone(), number_as_f64(v).unwrap_or(1.0));
                }
            }
        }
        let lang = options.get_str("default_language").unwrap_or("english");
        let default_language = Language::parse(lang).ok_or_else(|| {
            MongoError::location(
                28682,
                format!(
                    "Unrecognized language {lang} found for text index. Verify mongod was started with the correct options."
                ),
            )
        })?;
        let mut prefix = Vec::new();
        let mut suffix = Vec::new();
        let mut passed = false;
        for k in key.keys() {
            if k == "_fts" || k == "_ftsx" {
                passed = true;
            } else if passed {
                suffix.push(k.clone());
            } else {
                prefix.push(k.clone());
            }
        }
        Ok(TextSpec {
            weights,
            wildcard,
            default_language,
            language_override: options
                .get_str("language_override")
                .unwrap_or("language")
                .to_string(),
            prefix,
            suffix,
        })
    }

    /// Calls `f(text, language, weight)` for every string the index covers in
    /// `doc` (mongod's FTSElementIterator): the weighted paths (through
    /// embedded documents and one level of arrays), or every string with the
    /// wildcard; a document's `language_override` field sets the language of
    /// its strings and of the documents inside it.
    pub fn for_each_string(
        &self,
        doc: &RawDocument,
        f: &mut dyn FnMut(&str, Language, f64),
    ) -> MongoResult<()> {
        self.walk(doc, self.default_language, "", f, 0)
    }

    fn language_of(&self, doc: &RawDocument, current: Language) -> MongoResult<Language> {
        match doc.get(&self.language_override) {
            Ok(None) | Err(_) => Ok(current),
            Ok(Some(RawBsonRef::String(s))) => Language::parse(s).ok_or_else(|| {
                MongoError::location(17262, format!("language override unsupported: {s}"))
            }),
            Ok(Some(_)) => Err(MongoError::location(
                17261,
                "found language override field in document with non-string type",
            )),
        }
    }

    fn walk(
        &self,
        doc: &RawDocument,
        lang: Language,
        parent: &str,
        f: &mut dyn FnMut(&str, Language, f64),
        depth: usize,
    ) -> MongoResult<()> {
        let lang = self.language_of(doc, lang)?;
        let items: Vec<(&str, RawBsonRef<'_>)> =
            doc.iter().flatten().map(|(k, v)| (k.as_str(), v)).collect();
        self.walk_items(&items, lang, parent, false, f, depth)
    }

    fn walk_items(
        &self,
        items: &[(&str, RawBsonRef<'_>)],
        lang: Language,
        parent: &str,
        is_array: bool,
        f: &mut dyn FnMut(&str, Language, f64),
        depth: usize,
    ) -> MongoResult<()> {
        // Stored documents nest at most 100 levels deep (mongod's limit); the
        // bound keeps recursion finite whatever the input.
        if depth > 200 {
            return Ok(());
        }
        for (name, value) in items.iter().copied() {
            if self.wildcard && name == self.language_override.as_str() {
                continue;
            }
            let dotted = if parent.is_empty() {
                name.to_string()
            } else if is_array {
                parent.to_string()
            } else {
                format!("{parent}.{name}")
            };
            let probe = if matches!(value, RawBsonRef::Document(_)) {
                format!("{dotted}.")
            } else {
                dotted.clone()
            };
            let next = self.weights.range(probe..).next();
            let prefix_match =
                next.is_some_and(|(w, _)| *w == dotted || w.starts_with(&format!("{dotted}.")));
            if !self.wildcard && !prefix_match {
                continue;
            }
            let exact = next.filter(|(w, _)| **w == dotted).is_some();
            let weight = if prefix_match {
                next.map_or(1.0, |(_, w)| *w)
            } else {
                1.0
            };
            match value {
                // Strings on an exact weight (or any, with the wildcard);
                // documents below a proper prefix; arrays one level deep.
                RawBsonRef::String(s) if exact || self.wildcard => f(s, lang, weight),
                RawBsonRef::Document(d) if !exact || self.wildcard => {
                    self.walk(d, lang, &dotted, f, depth + 1)?;
                }
                RawBsonRef::Array(a) if !is_array || self.wildcard => {
                    let elems: Vec<(&str, RawBsonRef<'_>)> =
                        a.into_iter().flatten().map(|v| ("", v)).collect();
                    self.walk_items(&elems, lang, &dotted, true, f, depth + 1)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The index terms of `doc` with their scores (summed over its strings).
    pub fn term_scores(&self, doc: &RawDocument) -> MongoResult<BTreeMap<String, f64>> {
        let mut scores = BTreeMap::new();
        self.for_each_string(doc, &mut |s, lang, w| score_string(s, lang, w, &mut scores))?;
        Ok(scores)
    }

    /// The stored weights, for tests and explain.
    pub fn weights(&self) -> &BTreeMap<String, f64> {
        &self.weights
    }
}

/// A `$text` operator as the filter gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TextParams {
    pub search: String,
    /// `None`: the index's default language.
    pub language: Option<String>,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
}

impl TextParams {
    /// Parses `$text`'s argument with mongod's errors.
    pub fn parse(v: &Bson) -> MongoResult<TextParams> {
        let Bson::Document(d) = v else {
            return Err(MongoError::bad_value("$text expects an object"));
        };
        let wrong = |f: &str, want: &str, got: &Bson| {
            MongoError::type_mismatch(format!(
                "\"{f}\" had the wrong type. Expected {want}, found {}",
                crate::value::type_name(got)
            ))
        };
        let search = match d.get("$search") {
            Some(Bson::String(s)) => s.clone(),
            Some(other) => return Err(wrong("$search", "string", other)),
            None => {
                return Err(MongoError::new(
                    ErrorCode::NoSuchKey,
                    "Missing expected field \"$search\"",
                ))
            }
        };
        let mut expected = 1;
        let language = match d.get("$language") {
            None => None,
            Some(Bson::String(s)) => {
                expected += 1;
                Some(s.clone())
            }
            Some(other) => return Err(wrong("$language", "string", other)),
        };
        let mut flag = |f: &str| match d.get(f) {
            None => Ok(false),
            Some(Bson::Boolean(b)) => {
                expected += 1;
                Ok(*b)
            }
            Some(other) => Err(wrong(f, "bool", other)),
        };
        let case_sensitive = flag("$caseSensitive")?;
        let diacritic_sensitive = flag("$diacriticSensitive")?;
        if d.len() != expected {
            return Err(MongoError::bad_value("extra fields in $text"));
        }
        Ok(TextParams {
            search,
            language,
            case_sensitive,
            diacritic_sensitive,
        })
    }
}

/// A parsed `$search` string (mongod's FTSQueryImpl).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextQuery {
    pub language: Option<Language>,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
    /// Terms as the index holds them (folded, stemmed): the lookups.
    pub terms_for_bounds: BTreeSet<String>,
    /// Terms as the matcher compares them (case/diacritics kept when asked).
    pub positive_terms: BTreeSet<String>,
    pub negated_terms: BTreeSet<String>,
    pub positive_phrases: Vec<String>,
    pub negated_phrases: Vec<String>,
}

impl TextQuery {
    /// Parses `params.search` in `params.language` (else `default`).
    pub fn parse(params: &TextParams, default: Language) -> MongoResult<TextQuery> {
        let lang = match &params.language {
            Some(l) if !l.is_empty() => {
                Language::parse(l).ok_or_else(|| Language::unsupported(l))?
            }
            _ => default,
        };
        let mut q = TextQuery {
            language: Some(lang),
            case_sensitive: params.case_sensitive,
            diacritic_sensitive: params.diacritic_sensitive,
            ..TextQuery::default()
        };
        let (positive, negative) = q.split(&params.search);
        q.add_terms(&positive, lang, false);
        q.add_terms(&negative, lang, true);
        Ok(q)
    }

    /// Splits the search string into its positive and negated words (each
    /// joined by spaces) and collects the phrases.
    fn split(&mut self, s: &str) -> (String, String) {
        #[derive(PartialEq)]
        enum T {
            Space,
            Delim,
            Text,
        }
        let kind = |b: u8| match b {
            b'\n' | 0x0b | 0x0c | b'\r' | b' ' => T::Space,
            b'-' | b'"' => T::Delim,
            _ => T::Text,
        };
        let bytes = s.as_bytes();
        let mut pos = 0;
        let skip_space = |pos: &mut usize| {
            let start = *pos;
            while bytes.get(*pos).is_some_and(|b| kind(*b) == T::Space) {
                *pos += 1;
            }
            *pos > start
        };
        skip_space(&mut pos);
        let mut prev_space = true;
        let (mut positive, mut negative) = (String::new(), String::new());
        let (mut in_negation, mut in_phrase) = (false, false);
        let mut quote_at = 0usize;
        while let Some(&b) = bytes.get(pos) {
            let start = pos;
            pos += 1;
            let k = kind(b);
            if k == T::Text {
                while bytes.get(pos).is_some_and(|b| kind(*b) == T::Text) {
                    pos += 1;
                }
            }
            let token = s.get(start..pos).unwrap_or_default();
            let had_space = prev_space;
            prev_space = skip_space(&mut pos);
            match k {
                T::Text => {
                    if in_phrase && in_negation {
                        continue;
                    }
                    if in_negation && had_space {
                        in_negation = false;
                    }
                    let out = if in_negation {
                        &mut negative
                    } else {
                        &mut positive
                    };
                    out.push_str(token);
                    out.push(' ');
                }
                T::Delim if b == b'-' => {
                    if !in_phrase && had_space {
                        in_negation = true;
                    }
                }
                T::Delim => {
                    if in_phrase {
                        let phrase = s.get(quote_at + 1..start).unwrap_or_default().to_string();
                        if in_negation {
                            self.negated_phrases.push(phrase);
                        } else {
                            self.positive_phrases.push(phrase);
                        }
                        in_phrase = false;
                    } else {
                        in_phrase = true;
                        if in_negation && had_space {
                            in_negation = false;
                        }
                        quote_at = start;
                    }
                }
                T::Space => {}
            }
        }
        (positive, negative)
    }

    fn add_terms(&mut self, sentence: &str, lang: Language, negated: bool) {
        let plain = TokenOptions {
            filter_stop_words: true,
            ..TokenOptions::default()
        };
        let sensitive = self.case_sensitive || self.diacritic_sensitive;
        for w in tokenize(sentence, lang, plain) {
            if !negated {
                self.terms_for_bounds.insert(w.clone());
            }
            if !sensitive {
                if negated {
                    self.negated_terms.insert(w);
                } else {
                    self.positive_terms.insert(w);
                }
            }
        }
        if !sensitive {
            return;
        }
        let opts = TokenOptions {
            filter_stop_words: true,
            case_sensitive: self.case_sensitive,
            diacritic_sensitive: self.diacritic_sensitive,
        };
        for w in tokenize(sentence, lang, opts) {
            if negated {
                self.negated_terms.insert(w);
            } else {
                self.positive_terms.insert(w);
            }
        }
    }

    fn doc_options(&self) -> TokenOptions {
        TokenOptions {
            filter_stop_words: false,
            case_sensitive: self.case_sensitive,
            diacritic_sensitive: self.diacritic_sensitive,
        }
    }
}

/// A `$text` query resolved against the collection's text index: what the
/// planner looks up and what re-checks and scores each document.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundText {
    pub spec: TextSpec,
    pub query: TextQuery,
}

impl BoundText {
    /// Whether `doc` satisfies the query (mongod's FTSMatcher): some positive
    /// term in an indexed string, no negated term, every positive phrase and
    /// no negated phrase.
    pub fn matches(&self, doc: &RawDocument) -> MongoResult<bool> {
        let q = &self.query;
        let mut strings: Vec<(String, Language)> = Vec::new();
        self.spec
            .for_each_string(doc, &mut |s, l, _| strings.push((s.to_string(), l)))?;
        let opts = q.doc_options();
        let positive = if q.case_sensitive || q.diacritic_sensitive {
            &q.positive_terms
        } else {
            &q.terms_for_bounds
        };
        let mut has_positive = false;
        for (s, l) in &strings {
            for w in tokenize(s, *l, opts) {
                if q.negated_terms.contains(&w) {
                    return Ok(false);
                }
                has_positive |= positive.contains(&w);
            }
        }
        if !has_positive {
            return Ok(false);
        }
        let phrase_in = |p: &str| {
            strings
                .iter()
                .any(|(s, l)| phrase_matches(p, s, *l, q.case_sensitive, q.diacritic_sensitive))
        };
        Ok(q.positive_phrases.iter().all(|p| phrase_in(p))
            && !q.negated_phrases.iter().any(|p| phrase_in(p)))
    }

    /// `{$meta: "textScore"}` of a matching document: the sum of its index
    /// scores for the query's terms, as mongod's TEXT_OR adds them up.
    pub fn score(&self, doc: &RawDocument) -> f64 {
        let Ok(scores) = self.spec.term_scores(doc) else {
            return 0.0;
        };
        self.query
            .terms_for_bounds
            .iter()
            .filter_map(|t| scores.get(t))
            .sum()
    }
}

#[cfg(test)]
mod tests;
