// Secondary indexes through mongosh's own helpers (run by test_mongosh.py).
//
// The script does what a mongosh user does: createIndex, getIndexes,
// find().explain("executionStats"), a unique index refusing a duplicate,
// hint, a sort served by an index, countDocuments, dropIndex, dropIndexes.
// It checks nothing itself: everything it saw is printed as one line
// "INDEXES_RESULT <extended JSON>" that the Python side asserts on (and then
// looks at the collection with pymongo).

const coll = db.getCollection("people");
coll.drop();

const cities = ["Lima", "Oslo", "Paris", "Rome"];
const docs = [];
for (let i = 0; i < 100; i++) {
  docs.push({ _id: i, name: "user" + i, age: 20 + (i % 50), city: cities[i % 4] });
}
coll.insertMany(docs);

// Only what the test needs from a plan stage tree (FETCH -> IXSCAN ...).
function stages(stage) {
  const out = [];
  for (let s = stage; s; s = s.inputStage) {
    out.push({
      stage: s.stage,
      indexName: s.indexName,
      keyPattern: s.keyPattern,
      direction: s.direction,
      indexBounds: s.indexBounds,
    });
  }
  return out;
}

function summary(explained) {
  const st = explained.executionStats;
  return {
    winningPlan: stages(explained.queryPlanner.winningPlan),
    nReturned: st.nReturned,
    totalKeysExamined: st.totalKeysExamined,
    totalDocsExamined: st.totalDocsExamined,
    hasExecutionTimeMillis: st.executionTimeMillis !== undefined,
  };
}

function failure(fn) {
  try {
    fn();
    return null;
  } catch (e) {
    return { name: e.name, code: e.code, codeName: e.codeName, message: e.message };
  }
}

const result = {};

// Without an index first: the same query scans the collection.
result.before = summary(coll.find({ age: 30 }).explain("executionStats"));
result.beforeIds = coll.find({ age: 30 }).toArray().map((d) => d._id);

result.createAge = coll.createIndex({ age: 1 });
result.createCompound = coll.createIndex({ city: 1, age: -1 }, { name: "city_age" });
result.createUnique = coll.createIndex({ name: 1 }, { unique: true });
result.getIndexes = coll.getIndexes();

result.ageEq = summary(coll.find({ age: 30 }).explain("executionStats"));
result.ageEqIds = coll.find({ age: 30 }).toArray().map((d) => d._id);
// The collection-level form of explain.
result.ageRange = summary(coll.explain("executionStats").find({ age: { $gte: 65 } }).finish());
result.sortDesc = summary(coll.find({ age: { $gte: 65 } }).sort({ age: -1 }).explain("executionStats"));
result.sortDescAges = coll.find({ age: { $gte: 65 } }).sort({ age: -1 }).toArray().map((d) => d.age);
result.hinted = summary(coll.find({ age: 30 }).hint("city_age").explain("executionStats"));
result.badHint = failure(() => coll.find({ age: 30 }).hint("no_such_index").toArray());
result.countDocuments = coll.countDocuments({ age: 30 });

result.duplicate = failure(() => coll.insertOne({ _id: 1000, name: "user7", age: 99 }));
result.countAfterDuplicate = coll.countDocuments({});

result.dropAge = coll.dropIndex("age_1");
result.afterDropAge = coll.getIndexes().map((ix) => ix.name);
result.afterDropPlan = summary(coll.find({ age: 30 }).explain("executionStats"));
result.dropId = failure(() => coll.dropIndex("_id_"));
result.dropMissing = failure(() => coll.dropIndex("age_1"));
result.dropByKey = coll.dropIndex({ city: 1, age: -1 });
result.afterDropByKey = coll.getIndexes().map((ix) => ix.name);

// Left for the Python side to look at with pymongo.
coll.createIndex({ city: 1 }, { name: "city_sparse", sparse: true });

print("INDEXES_RESULT " + EJSON.stringify(result, { relaxed: true }));
