//! The JavaScript side of the `mapReduce` command: one [`MapReduce`] per
//! command, holding its `map`, `reduce` and `finalize` functions compiled in a
//! context of their own (mongod gives each operation a fresh scope: the
//! command's `scope` variables and whatever its functions assign stay in it),
//! on the thread's runtime, so the operation's deadline and kill interrupt
//! these scripts as they do `$where`.
//!
//! `emit(key, value)` is a native function of that context. It collects only
//! while `map` runs; called from `reduce` or `finalize` it does nothing, which
//! is what mongod's does there (its emitted values go to a map call that never
//! comes). A `MapReduce` is not `Send`: the command runs it on one thread.

use std::cell::RefCell;
use std::rc::Rc;

use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, RawBsonRef, RawDocument};
use rquickjs::function::{Rest, This};
use rquickjs::{Context, Ctx, Exception, Function, Persistent, Value};

use crate::engine::{self, compile_function, eval_function, script_error};
use crate::{convert, deadline};

/// mongod's `internalQueryMaxJsEmitBytes`: what one `map` call may emit.
pub const MAX_EMIT_BYTES: usize = 100 * 1024 * 1024;

/// What `emit` collected during the current `map` call.
#[derive(Default)]
struct Emits {
    collecting: bool,
    pairs: Vec<(Bson, Bson)>,
    bytes: usize,
    /// A failure of `emit` itself, reported with its own code rather than as
    /// the script error the exception becomes.
    error: Option<MongoError>,
}

/// One `mapReduce` command's functions.
pub struct MapReduce {
    // Field order is drop order: the functions go before their context.
    map: Persistent<Function<'static>>,
    reduce: Persistent<Function<'static>>,
    finalize: Option<Persistent<Function<'static>>>,
    emits: Rc<RefCell<Emits>>,
    context: Context,
}

impl MapReduce {
    /// Compiles the functions in a fresh context whose globals are `scope`'s
    /// fields (code values become functions, as in mongod). A syntax error
    /// is 139 JSInterpreterFailure.
    pub fn new(
        map: &str,
        reduce: &str,
        finalize: Option<&str>,
        scope: Option<&RawDocument>,
    ) -> MongoResult<MapReduce> {
        let context = engine::with(|e| e.fresh_context())?;
        let emits = Rc::new(RefCell::new(Emits::default()));
        let (map, reduce, finalize) = context.with(|ctx| -> MongoResult<_> {
            // mongod binds its native emit after the scope's variables: a
            // scope field named `emit` does not replace it.
            if let Some(scope) = scope {
                set_scope(&ctx, scope)?;
            }
            install_emit(&ctx, emits.clone())?;
            let map = Persistent::save(&ctx, function(&ctx, map)?);
            let reduce = Persistent::save(&ctx, function(&ctx, reduce)?);
            let finalize = match finalize {
                Some(f) => Some(Persistent::save(&ctx, function(&ctx, f)?)),
                None => None,
            };
            Ok((map, reduce, finalize))
        })?;
        Ok(MapReduce {
            map,
            reduce,
            finalize,
            emits,
            context,
        })
    }

    /// Runs `map` with `doc` as `this`; returns what it emitted, in order (an
    /// `undefined` key is null). More than [`MAX_EMIT_BYTES`] from one call is
    /// mongod's 31292, `emit` with other than two arguments its 31220.
    pub fn map(&self, doc: &RawDocument) -> MongoResult<Vec<(Bson, Bson)>> {
        deadline::check()?;
        {
            let mut e = self.emits.borrow_mut();
            e.collecting = true;
            e.pairs.clear();
            e.bytes = 0;
            e.error = None;
        }
        let outcome = self.context.with(|ctx| {
            let result = (|| -> rquickjs::Result<()> {
                let f = self.map.clone().restore(&ctx)?;
                let this = convert::document(&ctx, doc)?;
                f.call::<_, Value>((This(this),))?;
                Ok(())
            })();
            result.map_err(|e| self.failure(&ctx, e))
        });
        let mut e = self.emits.borrow_mut();
        e.collecting = false;
        let pairs = std::mem::take(&mut e.pairs);
        outcome.map(|()| pairs)
    }

    /// `reduce(key, values)`.
    pub fn reduce(&self, key: &Bson, values: Vec<Bson>) -> MongoResult<Bson> {
        self.call(&self.reduce, &[key.clone(), Bson::Array(values)])
    }

    /// `finalize(key, value)`, or the value itself without a finalize function.
    pub fn finalize(&self, key: &Bson, value: Bson) -> MongoResult<Bson> {
        match &self.finalize {
            Some(f) => self.call(f, &[key.clone(), value]),
            None => Ok(value),
        }
    }

    fn call(&self, f: &Persistent<Function<'static>>, args: &[Bson]) -> MongoResult<Bson> {
        deadline::check()?;
        self.context.with(|ctx| {
            let result = (|| -> rquickjs::Result<Bson> {
                let f = f.clone().restore(&ctx)?;
                let args = convert::values(&ctx, args)?;
                let v: Value = f.call((Rest(args),))?;
                convert::to_bson(&ctx, v)
            })();
            result.map_err(|e| self.failure(&ctx, e))
        })
    }

    /// The error a failed call ends the command with: the deadline's or the
    /// kill's when that stopped it, `emit`'s own, else the script's.
    fn failure(&self, ctx: &Ctx<'_>, e: rquickjs::Error) -> MongoError {
        if deadline::expired() {
            return deadline::error();
        }
        if let Some(err) = self.emits.borrow_mut().error.take() {
            return err;
        }
        script_error(ctx, e)
    }
}

/// A function given as source: a function expression (`function (k, v)
/// {...}`, an arrow function), else what `$where` accepts.
fn function<'js>(ctx: &Ctx<'js>, source: &str) -> MongoResult<Function<'js>> {
    match eval_function(ctx, &format!("({}\n)", source.trim())) {
        Ok(f) => Ok(f),
        Err(_) => compile_function(ctx, source),
    }
}

fn install_emit<'js>(ctx: &Ctx<'js>, emits: Rc<RefCell<Emits>>) -> MongoResult<()> {
    let emit = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, args: Rest<Value<'js>>| -> rquickjs::Result<()> {
            let mut state = emits.borrow_mut();
            if !state.collecting {
                return Ok(());
            }
            let mut args = args.0.into_iter();
            let (Some(k), Some(v), None) = (args.next(), args.next(), args.next()) else {
                state.error = Some(MongoError::location(31220, "emit takes 2 args"));
                return Err(Exception::throw_message(&ctx, "emit takes 2 args"));
            };
            let key = convert::to_bson(&ctx, k)?;
            let value = convert::to_bson(&ctx, v)?;
            state.bytes = state
                .bytes
                .saturating_add(approximate_size(&key) + approximate_size(&value));
            if state.bytes >= MAX_EMIT_BYTES {
                let message = format!(
                    "Size of emitted values exceeds the set size limit of {MAX_EMIT_BYTES} bytes"
                );
                state.error = Some(MongoError::location(31292, message.clone()));
                return Err(Exception::throw_message(&ctx, &message));
            }
            state.pairs.push((key, value));
            Ok(())
        },
    )
    .map_err(|e| MongoError::internal(format!("cannot define emit: {e}")))?;
    ctx.globals()
        .set("emit", emit)
        .map_err(|e| MongoError::internal(format!("cannot define emit: {e}")))
}

/// The `scope` document's fields as global variables.
fn set_scope(ctx: &Ctx<'_>, scope: &RawDocument) -> MongoResult<()> {
    for item in scope {
        let (name, v) = item.map_err(|e| crate::js_error(e.to_string()))?;
        let value: Value = match v {
            RawBsonRef::JavaScriptCode(code) => function(ctx, code)?.into_value(),
            RawBsonRef::JavaScriptCodeWithScope(c) => function(ctx, c.code)?.into_value(),
            other => {
                let owned = Bson::try_from(other).map_err(|e| crate::js_error(e.to_string()))?;
                let mut converted =
                    convert::values(ctx, &[owned]).map_err(|e| script_error(ctx, e))?;
                match converted.pop() {
                    Some(v) => v,
                    None => Value::new_undefined(ctx.clone()),
                }
            }
        };
        ctx.globals()
            .set(name.as_str(), value)
            .map_err(|e| script_error(ctx, e))?;
    }
    Ok(())
}

/// About the BSON size of `v` (mongod's limits on emitted and reduced values
/// are approximate too).
pub fn approximate_size(v: &Bson) -> usize {
    match v {
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => s.len() + 5,
        Bson::Document(d) => {
            5 + d
                .iter()
                .map(|(k, x)| k.len() + 2 + approximate_size(x))
                .sum::<usize>()
        }
        Bson::Array(a) => 5 + a.iter().map(|x| 4 + approximate_size(x)).sum::<usize>(),
        Bson::Binary(b) => b.bytes.len() + 5,
        Bson::RegularExpression(r) => r.pattern.as_str().len() + r.options.as_str().len() + 2,
        Bson::JavaScriptCodeWithScope(c) => c.code.len() + 10 + c.scope.len() * 16,
        Bson::ObjectId(_) => 12,
        Bson::Decimal128(_) => 16,
        Bson::Int32(_) => 4,
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => 0,
        Bson::Boolean(_) => 1,
        _ => 8,
    }
}
