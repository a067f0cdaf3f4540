// mongod's server-side JavaScript globals, as far as $where, $function and
// mapReduce need them.
// Evaluated once per engine (see engine.rs); `sleep` is defined in Rust.
(function (g) {
  "use strict";
  function ObjectId(hex) {
    if (!(this instanceof ObjectId)) return new ObjectId(hex);
    this.str = String(hex);
  }
  ObjectId.prototype.toString = function () { return 'ObjectId("' + this.str + '")'; };
  ObjectId.prototype.tojson = ObjectId.prototype.toString;
  ObjectId.prototype.valueOf = function () { return this.str; };
  ObjectId.prototype.equals = function (o) { return o instanceof ObjectId && o.str === this.str; };
  ObjectId.prototype.getTimestamp = function () {
    return new Date(parseInt(this.str.substr(0, 8), 16) * 1000);
  };

  // 64-bit integers: exact as a string, approximately as a number (valueOf),
  // so `this.n < 3` works as in mongod.
  function NumberLong(v) {
    if (!(this instanceof NumberLong)) return new NumberLong(v);
    this.__str = String(v === undefined ? 0 : v);
    this.floatApprox = Number(this.__str);
  }
  NumberLong.prototype.valueOf = function () { return this.floatApprox; };
  NumberLong.prototype.toNumber = NumberLong.prototype.valueOf;
  NumberLong.prototype.toString = function () {
    return Number.isSafeInteger(this.floatApprox)
      ? "NumberLong(" + this.__str + ")" : 'NumberLong("' + this.__str + '")';
  };
  NumberLong.prototype.tojson = NumberLong.prototype.toString;

  function NumberInt(v) {
    if (!(this instanceof NumberInt)) return new NumberInt(v);
    this.__v = Number(v === undefined ? 0 : v) | 0;
  }
  NumberInt.prototype.valueOf = function () { return this.__v; };
  NumberInt.prototype.toNumber = NumberInt.prototype.valueOf;
  NumberInt.prototype.toString = function () { return "NumberInt(" + this.__v + ")"; };

  function NumberDecimal(v) {
    if (!(this instanceof NumberDecimal)) return new NumberDecimal(v);
    this.__str = String(v === undefined ? 0 : v);
  }
  NumberDecimal.prototype.toString = function () { return 'NumberDecimal("' + this.__str + '")'; };
  NumberDecimal.prototype.tojson = NumberDecimal.prototype.toString;

  function Timestamp(t, i) {
    if (!(this instanceof Timestamp)) return new Timestamp(t, i);
    this.t = t || 0;
    this.i = i || 0;
  }
  Timestamp.prototype.getTime = function () { return this.t; };
  Timestamp.prototype.getInc = function () { return this.i; };
  Timestamp.prototype.toString = function () { return "Timestamp(" + this.t + ", " + this.i + ")"; };

  function BinData(type, b64) {
    if (!(this instanceof BinData)) return new BinData(type, b64);
    this.type = type;
    this.__b64 = String(b64);
  }
  BinData.prototype.subtype = function () { return this.type; };
  BinData.prototype.base64 = function () { return this.__b64; };
  BinData.prototype.toString = function () { return "BinData(" + this.type + ',"' + this.__b64 + '")'; };

  function DBPointer(ns, id) {
    if (!(this instanceof DBPointer)) return new DBPointer(ns, id);
    this.ns = ns;
    this.id = id;
  }

  var MinKey = { toString: function () { return "{ \"$minKey\" : 1 }"; } };
  var MaxKey = { toString: function () { return "{ \"$maxKey\" : 1 }"; } };

  function regex(pattern, options) {
    // JavaScript knows i, m, s and u of PCRE's options.
    var flags = options.replace(/[^imsu]/g, "");
    try { return new RegExp(pattern, flags); } catch (e) { return { pattern: pattern, options: options }; }
  }

  function tojson(x) {
    if (x === undefined) return "undefined";
    if (x === null) return "null";
    if (typeof x === "object" && typeof x.tojson === "function") return x.tojson();
    if (x instanceof Date) return 'ISODate("' + x.toISOString() + '")';
    if (typeof x === "object" && !(x instanceof RegExp)) {
      var parts = [];
      if (Array.isArray(x)) {
        for (var i = 0; i < x.length; i++) parts.push(tojson(x[i]));
        return "[ " + parts.join(", ") + " ]";
      }
      for (var k in x) {
        if (Object.prototype.hasOwnProperty.call(x, k)) parts.push(JSON.stringify(k) + " : " + tojson(x[k]));
      }
      return "{ " + parts.join(", ") + " }";
    }
    if (typeof x === "string") return JSON.stringify(x);
    return String(x);
  }

  var defs = {
    ObjectId: ObjectId, NumberLong: NumberLong, NumberInt: NumberInt,
    NumberDecimal: NumberDecimal, Timestamp: Timestamp, BinData: BinData,
    DBPointer: DBPointer, MinKey: MinKey, MaxKey: MaxKey, tojson: tojson,
    ISODate: function (s) { return s === undefined ? new Date() : new Date(s); },
    isNumber: function (x) { return typeof x === "number"; },
    isString: function (x) { return typeof x === "string"; },
    isObject: function (x) { return typeof x === "object" && x !== null; },
    print: function () {},
    printjson: function () {},
    printjsononeline: function () {},
    assert: function (cond, msg) { if (!cond) throw new Error(msg === undefined ? "assert failed" : msg); },
    // Constructors for the BSON -> JavaScript conversion (convert.rs).
    __bson: {
      oid: function (h) { return new ObjectId(h); },
      long: function (s) { return new NumberLong(s); },
      dec: function (s) { return new NumberDecimal(s); },
      date: function (ms) { return new Date(ms); },
      ts: function (t, i) { return new Timestamp(t, i); },
      bin: function (t, b) { return new BinData(t, b); },
      re: regex,
      ptr: function () { return new DBPointer(); },
      minKey: MinKey,
      maxKey: MaxKey,
      // JavaScript -> BSON (convert.rs): which BSON type a value becomes.
      kind: function (v) {
        if (v === undefined) return "undefined";
        if (v === null) return "null";
        var t = typeof v;
        if (t === "number" || t === "string" || t === "boolean") return t;
        if (t === "bigint") return "long";
        if (t === "function") return "code";
        if (v === MinKey) return "minKey";
        if (v === MaxKey) return "maxKey";
        if (v instanceof ObjectId) return "oid";
        if (v instanceof NumberLong) return "long";
        if (v instanceof NumberInt) return "int";
        if (v instanceof NumberDecimal) return "dec";
        if (v instanceof Timestamp) return "ts";
        if (v instanceof BinData) return "bin";
        if (v instanceof Date) return "date";
        if (v instanceof RegExp) return "re";
        if (Array.isArray(v)) return "array";
        return "object";
      }
    }
  };
  for (var name in defs) g[name] = defs[name];

  // The array helpers mongod's server-side scripts have (reduce functions
  // lean on Array.sum): an empty array sums to null, as there.
  function defineStatic(name, f) {
    Object.defineProperty(Array, name, { value: f, writable: true, configurable: true });
  }
  defineStatic("sum", function (arr) {
    if (arr.length === 0) return null;
    var total = arr[0];
    for (var i = 1; i < arr.length; i++) total += arr[i];
    return total;
  });
  defineStatic("avg", function (arr) {
    return arr.length === 0 ? null : Array.sum(arr) / arr.length;
  });
  defineStatic("stdDev", function (arr) {
    var mean = Array.avg(arr), sq = 0;
    for (var i = 0; i < arr.length; i++) sq += (arr[i] - mean) * (arr[i] - mean);
    return Math.sqrt(sq / arr.length);
  });
  defineStatic("contains", function (arr, x) {
    for (var i = 0; i < arr.length; i++) if (arr[i] === x) return true;
    return false;
  });
  defineStatic("unique", function (arr) {
    var seen = {}, out = [];
    for (var i = 0; i < arr.length; i++) {
      var key = tojson(arr[i]);
      if (!Object.prototype.hasOwnProperty.call(seen, key)) { seen[key] = true; out.push(arr[i]); }
    }
    return out;
  });
})(globalThis);
