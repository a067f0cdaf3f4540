//! One QuickJS runtime per thread, with the predicates it has compiled.
//!
//! The runtime is created on first use, with mongod's server-side globals
//! (`prelude.js`: `ObjectId`, `NumberLong`, `sleep`, `print`, ...). Compiled
//! functions are cached by predicate id; the cache is bounded (cleared when
//! full) because a predicate dropped on another thread cannot remove its entry
//! here.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use bisondb_error::{MongoError, MongoResult};
use bson::RawDocument;
use rquickjs::convert::Coerced;
use rquickjs::function::{Rest, This};
use rquickjs::{Context, Ctx, Exception, Function, Persistent, Runtime, Value};

use crate::{convert, deadline, js_error};

/// Compiled functions kept per thread before the cache is cleared.
const MAX_CACHED: usize = 256;
/// mongod's default `jsHeapLimitMB` is 1100; a smaller cap suits a server that
/// keeps one runtime per worker thread.
const MEMORY_LIMIT: usize = 512 << 20;
/// Worker threads have 2 MiB stacks and the matcher is above us on it.
const STACK_LIMIT: usize = 512 << 10;
/// How often a sleeping script looks at the deadline.
const SLEEP_SLICE: Duration = Duration::from_millis(20);

const PRELUDE: &str = include_str!("prelude.js");

pub(crate) struct Engine {
    // Field order is drop order: the functions go before the runtime they live in.
    funcs: HashMap<u64, Persistent<Function<'static>>>,
    /// `$function` bodies, by source (an expression holds no handle to share).
    bodies: HashMap<String, Persistent<Function<'static>>>,
    context: Context,
    _runtime: Runtime,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's engine, creating it on first use.
pub(crate) fn with<T>(f: impl FnOnce(&mut Engine) -> MongoResult<T>) -> MongoResult<T> {
    ENGINE.with(|cell| {
        // A script cannot reach back into the engine, so the borrow never nests;
        // fail rather than panic if it ever did.
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| MongoError::internal("JavaScript engine re-entered"))?;
        if slot.is_none() {
            *slot = Some(Engine::new()?);
        }
        match slot.as_mut() {
            Some(engine) => f(engine),
            None => Err(MongoError::internal("JavaScript engine unavailable")),
        }
    })
}

fn engine_error(e: rquickjs::Error) -> MongoError {
    MongoError::internal(format!("cannot start the JavaScript engine: {e}"))
}

impl Engine {
    fn new() -> MongoResult<Engine> {
        let runtime = Runtime::new().map_err(engine_error)?;
        runtime.set_memory_limit(MEMORY_LIMIT);
        runtime.set_max_stack_size(STACK_LIMIT);
        // Called every few thousand instructions: ends the script once the
        // operation's deadline has passed (an uncatchable exception).
        runtime.set_interrupt_handler(Some(Box::new(deadline::expired)));
        let context = new_context(&runtime)?;
        Ok(Engine {
            funcs: HashMap::new(),
            bodies: HashMap::new(),
            context,
            _runtime: runtime,
        })
    }

    /// A context of its own on this thread's runtime, with the server's
    /// globals: one operation's global variables (mapReduce's `scope`, what
    /// its functions assign) stay out of every other script's.
    pub(crate) fn fresh_context(&self) -> MongoResult<Context> {
        new_context(&self._runtime)
    }

    /// Compiles `source` and caches it under `id`.
    pub(crate) fn compile(&mut self, id: u64, source: &str) -> MongoResult<()> {
        if self.funcs.len() >= MAX_CACHED {
            self.funcs.clear();
        }
        let f = self.context.with(|ctx| -> MongoResult<_> {
            let f = compile_function(&ctx, source)?;
            Ok(Persistent::save(&ctx, f))
        })?;
        self.funcs.insert(id, f);
        Ok(())
    }

    /// Calls predicate `id` (compiling `source` first on a thread that has not
    /// seen it) with `doc` as `this` and `obj`.
    pub(crate) fn call(&mut self, id: u64, source: &str, doc: &RawDocument) -> MongoResult<bool> {
        if !self.funcs.contains_key(&id) {
            self.compile(id, source)?;
        }
        let Some(f) = self.funcs.get(&id).cloned() else {
            return Err(MongoError::internal(
                "$where function missing from the cache",
            ));
        };
        self.context.with(|ctx| {
            let outcome = (|| -> rquickjs::Result<bool> {
                let f = f.restore(&ctx)?;
                let this = convert::document(&ctx, doc)?;
                ctx.globals().set("obj", this.clone())?;
                let result: Value = f.call((This(this),))?;
                Ok(result.get::<Coerced<bool>>()?.0)
            })();
            // Leave no reference to the document behind in the global scope.
            let _ = ctx.globals().set("obj", Value::new_undefined(ctx.clone()));
            match outcome {
                // A script that ended because time ran out, however it ended.
                _ if deadline::expired() => Err(deadline::error()),
                Ok(b) => Ok(b),
                Err(e) => Err(script_error(&ctx, e)),
            }
        })
    }
}

impl Engine {
    /// Compiles (and caches) a `$function` body.
    pub(crate) fn check_body(&mut self, body: &str) -> MongoResult<()> {
        self.body(body).map(|_| ())
    }

    fn body(&mut self, body: &str) -> MongoResult<Persistent<Function<'static>>> {
        if let Some(f) = self.bodies.get(body) {
            return Ok(f.clone());
        }
        if self.bodies.len() >= MAX_CACHED {
            self.bodies.clear();
        }
        let f = self.context.with(|ctx| -> MongoResult<_> {
            let f = compile_body(&ctx, body)?;
            Ok(Persistent::save(&ctx, f))
        })?;
        self.bodies.insert(body.to_string(), f.clone());
        Ok(f)
    }

    /// `$function`: calls `body` (the source of a function) with `args`.
    pub(crate) fn call_body(&mut self, body: &str, args: &[bson::Bson]) -> MongoResult<bson::Bson> {
        let f = self.body(body)?;
        self.context.with(|ctx| {
            let outcome = (|| -> rquickjs::Result<bson::Bson> {
                let f = f.restore(&ctx)?;
                let args = convert::values(&ctx, args)?;
                let result: Value = f.call((Rest(args),))?;
                convert::to_bson(&ctx, result)
            })();
            match outcome {
                _ if deadline::expired() => Err(deadline::error()),
                Ok(v) => Ok(v),
                Err(e) => Err(script_error(&ctx, e)),
            }
        })
    }
}

/// A context on `runtime` with the server-side globals (`prelude.js`, `sleep`).
fn new_context(runtime: &Runtime) -> MongoResult<Context> {
    let context = Context::full(runtime).map_err(engine_error)?;
    context.with(|ctx| -> MongoResult<()> {
        let sleep = Function::new(ctx.clone(), sleep).map_err(engine_error)?;
        ctx.globals().set("sleep", sleep).map_err(engine_error)?;
        ctx.eval::<(), _>(PRELUDE).map_err(engine_error)
    })?;
    Ok(context)
}

/// A `$function` body must be a function (`function (a, b) {...}` or an
/// arrow function).
fn compile_body<'js>(ctx: &Ctx<'js>, body: &str) -> MongoResult<Function<'js>> {
    eval_function(ctx, &format!("({}\n)", body.trim()))
}

/// `$where` accepts a function, an expression, or a function body: mongod
/// returns the value of a lone expression (a trailing `;` allowed) and runs
/// anything else as a body.
pub(crate) fn compile_function<'js>(ctx: &Ctx<'js>, source: &str) -> MongoResult<Function<'js>> {
    let trimmed = source.trim();
    if trimmed.starts_with("function") {
        return eval_function(ctx, &format!("({trimmed}\n)"));
    }
    let expr = trimmed.trim_end_matches([';', ' ', '\t', '\r', '\n']);
    if !expr.is_empty() {
        if let Ok(f) = eval_function(ctx, &format!("(function() {{ return ({expr}\n); }})")) {
            return Ok(f);
        }
    }
    eval_function(ctx, &format!("(function() {{ {source}\n}})"))
}

pub(crate) fn eval_function<'js>(ctx: &Ctx<'js>, wrapped: &str) -> MongoResult<Function<'js>> {
    match ctx.eval::<Value, _>(wrapped) {
        Ok(v) => match v.into_function() {
            Some(f) => Ok(f),
            None => Err(js_error("$where must be a function or an expression")),
        },
        Err(e) => Err(script_error(ctx, e)),
    }
}

/// A script error as mongod words it: `Name: message` for an Error object,
/// the value itself for anything else thrown.
pub(crate) fn script_error(ctx: &Ctx<'_>, e: rquickjs::Error) -> MongoError {
    if !matches!(e, rquickjs::Error::Exception) {
        return js_error(e.to_string());
    }
    let thrown = ctx.catch();
    if let Some(obj) = thrown.as_object() {
        let name = obj.get::<_, Option<String>>("name").ok().flatten();
        let message = obj.get::<_, Option<String>>("message").ok().flatten();
        if let (Some(name), Some(message)) = (name, message) {
            return js_error(format!("{name}: {message}"));
        }
    }
    match thrown.get::<Coerced<String>>() {
        Ok(s) => js_error(format!("uncaught exception: {}", s.0)),
        Err(_) => js_error("uncaught exception"),
    }
}

/// `sleep(ms)`: blocks this thread (the command already runs off the async
/// runtime), waking in slices to honour the operation's deadline.
fn sleep<'js>(ctx: Ctx<'js>, ms: Coerced<f64>) -> rquickjs::Result<()> {
    let ms = ms.0;
    // NaN and non-positive values do not sleep.
    if ms.is_nan() || ms <= 0.0 {
        return Ok(());
    }
    let until = Instant::now() + Duration::from_secs_f64((ms / 1000.0).min(1e9));
    loop {
        if deadline::expired() {
            return Err(Exception::throw_internal(
                &ctx,
                "operation exceeded time limit",
            ));
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let mut slice = (until - now).min(SLEEP_SLICE);
        if let Some(d) = deadline::current() {
            slice = slice.min(d.saturating_duration_since(now));
        }
        std::thread::sleep(slice);
    }
}
