//! Reading the three accepted snapshot forms, with errors that name the JSON path.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Ha, NodeExtra, Resource, Snapshot, Task};
use crate::{Error, Result};

/// Every key the full form may carry; `data` is the `pvesh`/API envelope of a bare resources list
/// or of a whole document (as an API serving snapshots answers).
#[derive(Deserialize)]
struct AnyForm {
    #[serde(default)]
    resources: Option<Vec<Resource>>,
    #[serde(default)]
    data: Option<Envelope>,
    #[serde(default)]
    nodes: Option<BTreeMap<String, NodeExtra>>,
    #[serde(default)]
    ha: Option<Ha>,
    #[serde(default)]
    options: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    tasks: Option<Vec<Task>>,
    #[serde(default, deserialize_with = "crate::lenient::i64")]
    time: Option<i64>,
}

enum Form {
    Bare(Vec<Resource>),
    Doc(Box<AnyForm>),
}

/// What a `data` envelope holds: read by the JSON's own shape, so a large array is parsed once
/// and errors keep their path.
enum Envelope {
    Resources(Vec<Resource>),
    Doc(Box<AnyForm>),
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Shape;
        impl<'de> serde::de::Visitor<'de> for Shape {
            type Value = Envelope;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of resources or a snapshot document")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> std::result::Result<Envelope, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(Envelope::Resources)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<Envelope, A::Error> {
                AnyForm::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|doc| Envelope::Doc(Box::new(doc)))
            }
        }
        d.deserialize_any(Shape)
    }
}

pub(super) fn from_json(text: &str) -> Result<Snapshot> {
    // Editors on Windows and PowerShell's redirection start files with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(Error::Snapshot {
            path: String::new(),
            message: "the document is empty".into(),
        });
    }
    // Decide the form by the first byte so the large resources array is parsed once, and errors
    // point into the right form instead of serde's "did not match any variant".
    let mut de = serde_json::Deserializer::from_str(text);
    let form = if trimmed.starts_with('[') {
        Form::Bare(read(&mut de).map_err(in_resources)?)
    } else if trimmed.starts_with('{') {
        Form::Doc(Box::new(read(&mut de)?))
    } else {
        return Err(Error::Snapshot {
            path: String::new(),
            message: "expected a JSON object or array".into(),
        });
    };
    // Two dumps appended with `>>`, or stray text after the document, would otherwise be
    // silently cut off at the first value.
    de.end().map_err(|e| Error::Snapshot {
        path: String::new(),
        message: format!(
            "unexpected data after the JSON document at line {} column {} (two documents in one file?)",
            e.line(),
            e.column()
        ),
    })?;
    finish(form)
}

pub(super) fn from_value(value: serde_json::Value) -> Result<Snapshot> {
    let form = match value {
        serde_json::Value::Array(_) => Form::Bare(read(value).map_err(in_resources)?),
        serde_json::Value::Object(_) => Form::Doc(Box::new(read(value)?)),
        _ => {
            return Err(Error::Snapshot {
                path: String::new(),
                message: "expected a JSON object or array".into(),
            });
        }
    };
    finish(form)
}

fn read<'de, T: Deserialize<'de>, D>(d: D) -> Result<T>
where
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(d).map_err(|e| {
        let path = e.path().to_string();
        Error::Snapshot {
            // serde_path_to_error says `.` or `?` when the error is at the document itself.
            path: if path == "." || path == "?" {
                String::new()
            } else {
                path
            },
            message: super::words::plain(&e.into_inner().to_string()),
        }
    })
}

/// A bare array is the `resources` of the document: name paths as in the full form.
fn in_resources(e: Error) -> Error {
    match e {
        Error::Snapshot { path, message } if path.starts_with('[') => Error::Snapshot {
            path: format!("resources{path}"),
            message,
        },
        other => other,
    }
}

fn finish(form: Form) -> Result<Snapshot> {
    let doc = match form {
        Form::Bare(resources) => {
            return Ok(Snapshot {
                resources,
                ..Snapshot::default()
            });
        }
        Form::Doc(doc) => *doc,
    };
    let resources = match (doc.resources, doc.data) {
        (Some(r), _) => r,
        (None, Some(Envelope::Resources(d))) => d,
        (None, Some(Envelope::Doc(inner))) => return finish(Form::Doc(inner)),
        (None, None) => {
            return Err(Error::Snapshot {
                path: String::new(),
                message: "no `resources` array (nor a `data` array from pvesh/the API)".into(),
            });
        }
    };
    Ok(Snapshot {
        resources,
        nodes: doc.nodes.unwrap_or_default(),
        ha: doc.ha.unwrap_or_default(),
        options: doc.options.unwrap_or_default(),
        tasks: doc.tasks.unwrap_or_default(),
        time: doc.time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_after_the_document_is_an_error_and_a_byte_order_mark_is_skipped() {
        let bare = r#"[{"id":"node/a","type":"node","node":"a","status":"online"}]"#;
        for text in [
            format!("{bare}\n{bare}"),
            format!("{bare} xyz"),
            format!(r#"{{"resources": {bare}}}}}"#),
        ] {
            let e = from_json(&text).unwrap_err().to_string();
            assert!(e.contains("unexpected data after the JSON document"), "{e}");
        }
        assert_eq!(
            from_json(&format!("{bare}\n\n")).unwrap().resources.len(),
            1
        );
        let bom = format!("\u{feff}{bare}");
        assert_eq!(from_json(&bom).unwrap().resources.len(), 1);
    }

    #[test]
    fn bare_array_and_data_envelope_give_the_same_resources() {
        let bare =
            r#"[{"id":"node/pve1","type":"node","node":"pve1","status":"online","maxmem":"1024"}]"#;
        let wrapped = format!(r#"{{"data": {bare}}}"#);
        let doc = format!(r#"{{"data": {{"resources": {bare}, "time": 7}}}}"#);
        let enveloped = Snapshot::from_json(&doc).unwrap();
        assert_eq!(enveloped.time, Some(7));
        assert_eq!(
            enveloped.resources,
            Snapshot::from_json(bare).unwrap().resources
        );
        let full = format!(r#"{{"resources": {bare}, "time": 5}}"#);
        let a = from_json(bare).unwrap();
        let b = from_json(&wrapped).unwrap();
        let c = from_json(&full).unwrap();
        assert_eq!(a.resources, b.resources);
        assert_eq!(a.resources, c.resources);
        assert_eq!(a.resources[0].maxmem, Some(1024));
        assert_eq!(c.time, Some(5));
    }

    #[test]
    fn errors_name_the_path() {
        let e = from_json(
            r#"{"resources":[{"id":"a","type":"node"},{"id":"b","type":"qemu","maxmem":"x"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("resources[1].maxmem"), "{e}");
        let e = from_json(r#"{"nodes":{}}"#).unwrap_err().to_string();
        assert!(e.contains("no `resources`"), "{e}");
        let e = from_json(r#"[{"id":"a","type":"node"},{"id":"b","type":"qemu","maxmem":-1}]"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resources[1].maxmem"),
            "bare arrays name paths as the full form: {e}"
        );
        let e = from_json("42").unwrap_err().to_string();
        assert!(e.contains("object or array"), "{e}");
        let e = from_json(r#"[{"id": "a""#).unwrap_err().to_string();
        assert!(e.contains("snapshot"), "{e}");
    }

    #[test]
    fn errors_say_what_was_expected_in_json_words() {
        let cases = [
            (
                "[1,2]",
                "invalid snapshot at resources[0]: expected an object (one entry of /cluster/resources), got the number 1 at line 1 column 2",
            ),
            (
                r#"{"resources":{"a":1}}"#,
                "invalid snapshot at resources: expected an array, got an object at line 1 column 13",
            ),
            (
                r#"{"resources":[],"nodes":{"a":"x"}}"#,
                r#"invalid snapshot at nodes.a: expected an object (a node's notes, rrddata, storage_avail and volumes), got the string "x" at line 1 column 32"#,
            ),
            (
                r#"{"resources":[],"tasks":[5]}"#,
                "invalid snapshot at tasks[0]: expected an object (one entry of /cluster/tasks), got the number 5 at line 1 column 26",
            ),
            (
                r#"{"resources":[],"ha":{"rules":{}}}"#,
                "invalid snapshot at ha.rules: expected an array, got an object at line 1 column 30",
            ),
            (
                r#"{"resources":[{"id":"node/a","type":"node","status":true}]}"#,
                "invalid snapshot at resources[0].status: expected a string, got true at line 1 column 56",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(from_json(text).unwrap_err().to_string(), want, "{text}");
        }
        // From a parsed value serde_json knows no line.
        let value = serde_json::json!({"resources": [], "options": [1]});
        assert_eq!(
            from_value(value).unwrap_err().to_string(),
            "invalid snapshot at options: expected an object, got an array"
        );
    }

    #[test]
    fn byte_counts_are_read_exactly_and_an_overflow_names_the_field() {
        let doc = |maxmem: &str| format!(r#"[{{"id":"node/a","type":"node","maxmem":{maxmem}}}]"#);
        for (text, want) in [
            ("9007199254740993", 9_007_199_254_740_993),
            ("\"9007199254740993\"", 9_007_199_254_740_993),
            ("18446744073709551615", u64::MAX),
        ] {
            let snap = from_json(&doc(text)).unwrap();
            assert_eq!(snap.resources[0].maxmem, Some(want), "{text}");
            let again = from_json(&snap.to_json_pretty()).unwrap();
            assert_eq!(
                again.resources[0].maxmem,
                Some(want),
                "written back exactly: {text}"
            );
        }
        for text in ["18446744073709551616", "\"18446744073709551616\""] {
            let e = from_json(&doc(text)).unwrap_err().to_string();
            assert!(e.contains("resources[0].maxmem"), "{e}");
            assert!(!e.contains("18446744073709552000"), "{e}");
        }
    }

    #[test]
    fn free_bytes_and_volumes_are_read_leniently() {
        let snap = from_json(
            r#"{"resources":[{"id":"node/a","type":"node"}],"nodes":{"a":{
                "storage_avail":{"local":"1099511627776","gone":null,"big":18446744073709551615},
                "volumes":null}}}"#,
        )
        .unwrap();
        let a = &snap.nodes["a"];
        let avail: Vec<(&str, u64)> = a
            .storage_avail
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(avail, [("big", u64::MAX), ("local", 1 << 40)]);
        assert!(a.volumes.is_empty());
        let e = from_json(
            r#"{"resources":[{"id":"node/a","type":"node"}],"nodes":{"a":{"storage_avail":{"x":"lots"}}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("nodes.a.storage_avail"), "{e}");
        let e = from_json(
            r#"{"resources":[{"id":"node/a","type":"node"}],"nodes":{"a":{"storage_avail":null}}}"#,
        );
        assert!(e.unwrap().nodes["a"].storage_avail.is_empty());
    }

    #[test]
    fn round_trip_is_stable() {
        let text = r#"{"resources":[{"id":"qemu/100","type":"qemu","vmid":"100","node":"pve1","maxcpu":4,"template":0,"tags":"a;b"}],
            "nodes":{"pve1":{"notes":"flxp.label.ssd","rrddata":{"time":1,"pressurememoryfull":"0.5"}}},
            "tasks":[{"upid":"UPID:x","type":"qmigrate","id":"100","starttime":10}],
            "options":{"crs":"ha=static"},"time":20}"#;
        let snap = from_json(text).unwrap();
        let written = snap.to_json_pretty();
        assert!(written.contains("\"maxcpu\": 4,"), "{written}");
        assert!(written.contains("\"template\": 0"), "{written}");
        assert!(
            written.contains("\"time\": 1") && !written.contains("\"time\": 1.0"),
            "RRD whole values are written as integers: {written}"
        );
        let again = from_json(&written).unwrap();
        assert_eq!(snap, again);
        assert_eq!(
            again.nodes["pve1"]
                .rrddata
                .as_ref()
                .unwrap()
                .get("pressurememoryfull"),
            Some(0.5)
        );
    }
}
