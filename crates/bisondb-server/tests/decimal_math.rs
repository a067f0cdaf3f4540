//! Decimal128 logarithms, exponentials and powers (`$exp`, `$ln`, `$log10`,
//! `$log`, `$pow`) and trigonometry through the driver: 34-digit results and
//! mongod's errors.

use crate::common::*;
use bson::{doc, Bson, Decimal128, Document};
use futures::TryStreamExt;
use std::str::FromStr;

fn dec(s: &str) -> Bson {
    Bson::Decimal128(Decimal128::from_str(s).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_logarithms_and_powers() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("decmath").collection::<Document>(t);
        coll.insert_one(
            doc! {"_id": 1, "one": dec("1"), "ten": dec("10"), "x": dec("1.1"), "k": dec("1000")},
        )
        .await
        .unwrap();
        let out: Vec<Document> = coll
            .aggregate(vec![doc! {"$project": {
                "_id": 0,
                "e": {"$exp": "$one"},
                "ln10": {"$ln": "$ten"},
                "lg": {"$log10": "$k"},
                "log": {"$log": ["$k", 10]},
                "sq": {"$pow": ["$x", 2]},
                "root2": {"$pow": [2, dec("0.5")]},
                "sqrt2": {"$sqrt": dec("2")},
                "sin": {"$sin": "$one"},
                "atan2": {"$atan2": ["$one", -1]},
                "pi": {"$degreesToRadians": dec("180")},
            }}])
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let d = &out[0];
        assert_eq!(
            d.get("e"),
            Some(&dec("2.718281828459045235360287471352662")),
            "{t}"
        );
        assert_eq!(
            d.get("ln10"),
            Some(&dec("2.302585092994045684017991454684364")),
            "{t}"
        );
        assert_eq!(d.get("lg"), Some(&dec("3")), "{t}");
        assert_eq!(d.get("log"), Some(&dec("3")), "{t}");
        assert_eq!(d.get("sq"), Some(&dec("1.21")), "{t}");
        assert_eq!(d.get("root2"), d.get("sqrt2"), "{t}");
        assert_eq!(
            d.get("sin"),
            Some(&dec("0.8414709848078965066525023216302990")),
            "{t}"
        );
        assert_eq!(
            d.get("atan2"),
            Some(&dec("2.356194490192344928846982537459627")),
            "{t}"
        );
        assert_eq!(
            d.get("pi"),
            Some(&dec("3.141592653589793238462643383279503")),
            "{t}"
        );

        for (expr, code) in [
            (doc! {"$ln": dec("0")}, 28766),
            (doc! {"$log10": dec("-1")}, 28761),
            (doc! {"$log": [dec("5"), dec("1")]}, 28759),
            (doc! {"$log": [dec("-5"), 10]}, 28758),
            (doc! {"$pow": [dec("0"), -2]}, 28764),
            (doc! {"$asin": dec("2")}, 50989),
            (doc! {"$cos": dec("-Infinity")}, 50989),
        ] {
            let res = coll
                .aggregate(vec![doc! {"$project": {"v": expr.clone()}}])
                .await;
            let res = match res {
                Ok(cursor) => cursor.try_collect::<Vec<Document>>().await,
                Err(e) => Err(e),
            };
            expect_code(res, code);
        }
    }
}
