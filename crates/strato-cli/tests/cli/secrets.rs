//! Secrets (issue 28, item 4): a secret written into any field of a Kineto trace that strato
//! writes back (metadata, event attributes, host, process, thread, device and event names) is
//! absent from every output — the profile's tables and metadata.json read back, `info`,
//! exports, the report, `sql` over every table — in every form the rules name (docs/profile-format.md, "Secrets"), and
//! `--keep-secrets` keeps each of them (so the greps can see what they look for).

use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::common::{data, ok, s, strato};

/// One secret in a text: how it is written around its value (the value is what must not
/// appear in any output).
#[derive(Debug, Clone)]
enum TextForm {
    /// `NAME=value`.
    Assignment(&'static str),
    /// An environment block: `HOME=/root<sep>NAME=value<sep>PATH=/usr/bin`.
    EnvBlock(&'static str, &'static str),
    /// `--flag value`.
    Flag(&'static str),
    /// `--flag=value`.
    FlagEquals(&'static str),
    /// A JSON list written as text: `["run.py", "--flag", "value"]`.
    ListText(&'static str),
    /// A known token shape: the prefix and the value, one token.
    Shape(&'static str),
    /// `Authorization: Bearer value`.
    Bearer,
    /// `https://user:value@host/simple`.
    UrlPassword,
    /// `AKIA` and 16 upper-case letters and digits.
    AwsKeyId,
    /// `DB_PASSWORD=<digits>`.
    NumericPassword,
}

/// One secret in a JSON object field (metadata, event args): a text, or a keyed value.
#[derive(Debug, Clone)]
enum JsonForm {
    Text(TextForm),
    /// `{"KEY": "value"}`.
    Keyed(&'static str),
    /// `{"KEY": <digits>}` (a number under a password word).
    KeyedNumber(&'static str),
    /// `["run.py", "--flag", "value"]`.
    FlagList(&'static str),
}

const NAMES: &[&str] = &[
    "HF_TOKEN",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_AUTH",
    "db.password",
    "hfToken",
];
const FLAGS: &[&str] = &["--hf-token", "--api-key", "--password", "-auth"];
const SHAPES: &[&str] = &[
    "hf_",
    "sk-proj-",
    "ghp_",
    "gho_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
];
const PREFIXES: &[&str] = &["", "python train.py ", "env ", "x\n", "a,", "GPU 0 ("];
const SUFFIXES: &[&str] = &["", " --lr 1", "\n", "\0rest=1", ")", ", more"];
const NUMBER_KEYS: &[&str] = &["DB_PASSWORD", "passphrase", "redisSecret"];

fn text_form() -> impl Strategy<Value = TextForm> {
    prop_oneof![
        prop::sample::select(NAMES).prop_map(TextForm::Assignment),
        (
            prop::sample::select(NAMES),
            prop::sample::select(&["\0", "\n", " "][..])
        )
            .prop_map(|(n, sep)| TextForm::EnvBlock(n, sep)),
        prop::sample::select(FLAGS).prop_map(TextForm::Flag),
        prop::sample::select(FLAGS).prop_map(TextForm::FlagEquals),
        prop::sample::select(FLAGS).prop_map(TextForm::ListText),
        prop::sample::select(SHAPES).prop_map(TextForm::Shape),
        Just(TextForm::Bearer),
        Just(TextForm::UrlPassword),
        Just(TextForm::AwsKeyId),
        Just(TextForm::NumericPassword),
    ]
}

fn json_form() -> impl Strategy<Value = JsonForm> {
    prop_oneof![
        3 => text_form().prop_map(JsonForm::Text),
        1 => prop::sample::select(NAMES).prop_map(JsonForm::Keyed),
        1 => prop::sample::select(NUMBER_KEYS).prop_map(JsonForm::KeyedNumber),
        1 => prop::sample::select(FLAGS).prop_map(JsonForm::FlagList),
    ]
}

/// A random token of `len` characters of `alphabet`.
fn token(alphabet: &'static str, len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(0..alphabet.len(), len).prop_map(move |ix| {
        ix.into_iter()
            .map(|i| alphabet.as_bytes()[i] as char)
            .collect()
    })
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A secret placed in one field: its form, its value and the text around it.
#[derive(Debug, Clone)]
struct Placed {
    form: JsonForm,
    /// Letters and digits, 24 to 32 (the value of every form but the numeric and AWS ones).
    value: String,
    /// 16 upper-case letters and digits (AWS key ids).
    aws: String,
    /// 15 digits, the first a 9 (numeric passwords).
    digits: String,
    prefix: &'static str,
    suffix: &'static str,
}

fn placed() -> impl Strategy<Value = Placed> {
    (
        json_form(),
        token(ALNUM, 24..33),
        token("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 16..17),
        token("0123456789", 14..15),
        prop::sample::select(PREFIXES),
        prop::sample::select(SUFFIXES),
    )
        .prop_map(|(form, value, aws, digits, prefix, suffix)| Placed {
            form,
            value,
            aws,
            digits: format!("9{digits}"),
            prefix,
            suffix,
        })
}

impl Placed {
    /// What must not appear in any output.
    fn needle(&self) -> &str {
        match &self.form {
            JsonForm::Text(TextForm::AwsKeyId) => &self.aws,
            JsonForm::Text(TextForm::NumericPassword) | JsonForm::KeyedNumber(_) => &self.digits,
            _ => &self.value,
        }
    }

    /// The secret as a text (a keyed form, for a field that is only a text, as its text form).
    fn text(&self) -> String {
        let v = &self.value;
        let body = match &self.form {
            JsonForm::Text(form) => match form {
                TextForm::Assignment(n) => format!("{n}={v}"),
                TextForm::EnvBlock(n, sep) => format!("HOME=/root{sep}{n}={v}{sep}PATH=/usr/bin"),
                TextForm::Flag(f) => format!("{f} {v}"),
                TextForm::FlagEquals(f) => format!("{f}={v}"),
                TextForm::ListText(f) => format!("[\"run.py\", \"{f}\", \"{v}\"]"),
                TextForm::Shape(p) => format!("{p}{v}"),
                TextForm::Bearer => format!("Authorization: Bearer {v}"),
                TextForm::UrlPassword => format!("https://user:{v}@pypi.example.com/simple"),
                TextForm::AwsKeyId => format!("AWS_ACCESS_KEY_ID=AKIA{}", self.aws),
                TextForm::NumericPassword => format!("DB_PASSWORD={}", self.digits),
            },
            JsonForm::Keyed(n) => format!("{n}={v}"),
            JsonForm::KeyedNumber(n) => format!("{n}={}", self.digits),
            JsonForm::FlagList(f) => format!("{f} {v}"),
        };
        format!("{}{body}{}", self.prefix, self.suffix)
    }

    /// The secret as a JSON object's entries.
    fn entries(&self) -> serde_json::Map<String, Value> {
        let mut map = serde_json::Map::new();
        match &self.form {
            JsonForm::Text(_) => {
                map.insert("note".into(), json!(self.text()));
            }
            JsonForm::Keyed(n) => {
                map.insert((*n).into(), json!(self.value));
            }
            JsonForm::KeyedNumber(n) => {
                let number: u64 = self.digits.parse().unwrap();
                map.insert((*n).into(), json!(number));
            }
            JsonForm::FlagList(f) => {
                map.insert("argv".into(), json!(["run.py", f, self.value, "--lr", "1"]));
            }
        }
        map
    }
}

/// The secrets of one trace, one per field.
#[derive(Debug, Clone)]
struct Fields {
    metadata: Placed,
    cpu_args: Placed,
    kernel_args: Placed,
    instant_args: Placed,
    host: Placed,
    process_name: Placed,
    process_labels: Placed,
    thread_name: Placed,
    device_name: Placed,
    /// The name of a `record_function` range (an event name).
    annotation_name: Placed,
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        (placed(), placed(), placed(), placed(), placed()),
        (placed(), placed(), placed(), placed(), placed()),
    )
        .prop_map(
            |(
                (metadata, cpu_args, kernel_args, instant_args, host),
                (process_name, process_labels, thread_name, device_name, annotation_name),
            )| Fields {
                metadata,
                cpu_args,
                kernel_args,
                instant_args,
                host,
                process_name,
                process_labels,
                thread_name,
                device_name,
                annotation_name,
            },
        )
}

impl Fields {
    fn all(&self) -> [(&'static str, &Placed); 10] {
        [
            ("metadata", &self.metadata),
            ("cpu_op args", &self.cpu_args),
            ("kernel args", &self.kernel_args),
            ("instant args", &self.instant_args),
            ("host", &self.host),
            ("process name", &self.process_name),
            ("process labels", &self.process_labels),
            ("thread name", &self.thread_name),
            ("device name", &self.device_name),
            ("annotation name", &self.annotation_name),
        ]
    }

    /// A small Kineto trace carrying every secret in its field.
    fn trace(&self) -> Value {
        let args = |p: &Placed, base: Value| {
            let mut map = p.entries();
            if let Value::Object(b) = base {
                map.extend(b);
            }
            Value::Object(map)
        };
        let mut metadata = self.metadata.entries();
        metadata.insert("TOKENIZERS_PARALLELISM".into(), json!("false"));
        json!({
            "schemaVersion": 1,
            "hostname": self.host.text(),
            "distributedInfo": {"rank": 0, "world_size": 1},
            "deviceProperties": [{"id": 0, "name": self.device_name.text(), "numSms": 132,
                                  "totalGlobalMem": 85_000_000_000_i64,
                                  "computeMajor": 9, "computeMinor": 0}],
            "metadata": Value::Object(metadata),
            "traceEvents": [
                {"ph":"M","name":"process_name","pid":1,"tid":0,
                 "args":{"name": self.process_name.text()}},
                {"ph":"M","name":"process_labels","pid":1,"tid":0,
                 "args":{"labels": self.process_labels.text()}},
                {"ph":"M","name":"thread_name","pid":1,"tid":1,
                 "args":{"name": self.thread_name.text()}},
                {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,
                 "ts":0,"dur":1000},
                {"ph":"X","name": self.annotation_name.text(),"cat":"user_annotation","pid":1,
                 "tid":1,"ts":5,"dur":200},
                {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":10,"dur":100,
                 "args": args(&self.cpu_args, json!({"External id": 1}))},
                {"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,
                 "ts":20,"dur":10,"args":{"correlation":1,"External id":1}},
                {"ph":"X","name":"gemm_kernel","cat":"kernel","pid":0,"tid":7,"ts":50,"dur":500,
                 "args": args(&self.kernel_args,
                              json!({"correlation":1,"device":0,"stream":7,"External id":1}))},
                {"ph":"i","name":"mark","cat":"user_annotation","pid":1,"tid":1,"ts":30,"s":"t",
                 "args": args(&self.instant_args, json!({}))},
            ],
        })
    }
}

/// Every text the profile at `dir` holds: each table read back (strings, ranks, processes,
/// tracks, devices, args), metadata.json, and the raw bytes of every file in it.
fn profile_texts(dir: &Path) -> String {
    let trace = strato_store::read(dir).unwrap();
    let mut all = String::new();
    for (_, text) in trace.strings.iter() {
        all.push_str(text);
        all.push('\n');
    }
    for blob in trace.args.iter() {
        all.push_str(&blob);
        all.push('\n');
    }
    for rank in &trace.ranks {
        let texts = [&rank.host, &rank.metadata.to_json()];
        all.extend(texts.into_iter().flatten().map(|t| format!("{t}\n")));
    }
    for p in &trace.processes {
        all.extend(
            [&p.name, &p.labels]
                .into_iter()
                .flatten()
                .map(|t| format!("{t}\n")),
        );
    }
    for t in &trace.tracks {
        all.extend(t.name.iter().map(|t| format!("{t}\n")));
    }
    for d in &trace.devices {
        all.extend(
            [&d.name, &Some(d.extra.to_json())]
                .into_iter()
                .flatten()
                .map(|t| format!("{t}\n")),
        );
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        all.push_str(&String::from_utf8_lossy(&bytes));
    }
    all
}

/// Stdout and stderr of `strato args` (it must succeed).
fn said(args: &[&str]) -> String {
    let out = ok(args);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

fn check_no_secret(fields: &Fields, what: &str, text: &str) -> Result<(), TestCaseError> {
    for (field, placed) in fields.all() {
        prop_assert!(
            !text.contains(placed.needle()),
            "the secret of the {} ({:?}) is in {}",
            field,
            placed.text(),
            what
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_secret_in_any_field_reaches_no_output(fields in fields()) {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.json");
        std::fs::write(&trace, serde_json::to_vec(&fields.trace()).unwrap()).unwrap();
        let (t, d) = (s(&trace), dir.path());

        // --keep-secrets keeps every one of them, in the tables they belong to.
        let kept = d.join("kept");
        ok(&["import", t, "-o", s(&kept), "--keep-secrets"]);
        let kept_texts = profile_texts(&kept);
        for (field, placed) in fields.all() {
            prop_assert!(kept_texts.contains(placed.needle()),
                "--keep-secrets lost the {} ({:?})", field, placed.text());
        }

        let prof = d.join("prof");
        let import = said(&["import", t, "-o", s(&prof)]);
        check_no_secret(&fields, "import's output", &import)?;
        check_no_secret(&fields, "the profile", &profile_texts(&prof))?;
        // The trace, the redacted profile and the unredacted one (redacted on reading).
        for input in [&trace, &prof, &kept] {
            let i = s(input);
            for args in [vec!["info", i], vec!["info", i, "--json"]] {
                check_no_secret(&fields, &format!("{args:?}"), &said(&args))?;
            }
            let (chrome, perfetto) = (d.join("out.json"), d.join("out.pftrace"));
            ok(&["export", i, "--chrome", s(&chrome), "--perfetto", s(&perfetto)]);
            for out in [&chrome, &perfetto] {
                let bytes = std::fs::read(out).unwrap();
                check_no_secret(&fields, &format!("the export of {i}"), &String::from_utf8_lossy(&bytes))?;
            }
            let report = d.join("r.html");
            ok(&["report", i, "-o", s(&report)]);
            check_no_secret(&fields, &format!("the report of {i}"),
                &std::fs::read_to_string(&report).unwrap())?;
            // The tables that hold text.
            for table in ["strings", "args", "ranks", "processes", "tracks", "devices"] {
                let query = format!("SELECT * FROM {table}");
                check_no_secret(&fields, &format!("sql over {table} of {i}"),
                    &said(&["sql", &query, i, "--format", "csv", "--csv-raw"]))?;
            }
        }
    }
}

/// What is not a secret stays, in the same fields.
#[test]
fn configuration_that_looks_like_a_secret_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let kept = [
        "TOKENIZERS_PARALLELISM=false",
        "SSH_AUTH_SOCK=/tmp/ssh-agent.sock",
        "google-auth==2.40.3",
        "--max-tokens 512",
        "num_tokens=77",
        "hf_hub_download",
    ];
    let text = kept.join(" ");
    let doc = json!({
        "schemaVersion": 1,
        "metadata": {"cmd": text, "MAX_TOKEN": 5, "num_tokens": 12},
        "traceEvents": [
            {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name": text}},
            {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":10,"dur":100,
             "args": {"cmd": text, "key": 3}},
        ],
    });
    let trace = dir.path().join("t.json");
    std::fs::write(&trace, serde_json::to_vec(&doc).unwrap()).unwrap();
    let prof = dir.path().join("prof");
    let out = ok(&["import", s(&trace), "-o", s(&prof)]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("redacted"));
    let stored = strato_store::read(&prof).unwrap();
    let meta = stored.ranks[0].metadata.to_json().unwrap();
    let args = stored.args.get(0).unwrap();
    let name = stored.processes[0].name.clone().unwrap();
    for k in kept {
        for (what, text) in [
            ("metadata", &meta),
            ("args", &args.to_string()),
            ("name", &name),
        ] {
            assert!(text.contains(k), "{k} lost from the {what}: {text}");
        }
    }
    assert!(
        meta.contains("\"MAX_TOKEN\":5") && args.contains("\"key\":3"),
        "{meta} {args}"
    );
    assert!(!meta.contains("<redacted") && !args.contains("<redacted"));
}

/// The real Falconsai H100 trace (its environment, its real events' attributes, its process
/// names) with secrets put in the forms of the issue: none reaches the profile, `info` names
/// them without values, and `--keep-secrets` keeps them.
#[test]
fn secrets_written_into_a_real_trace_are_redacted_in_its_profile() {
    use std::io::Read;
    let path = data("kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz");
    if !path.exists() {
        eprintln!("no shared data: skipped");
        return;
    }
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let secrets = [
        "hf_RealTraceToken0123456789abcdef",
        "AKIAREALTRACE0KEY012",
        "s3cr3tInAnArgsBlob",
        "procNameSecret99",
    ];
    let inject = |text: &mut String, needle: &str, with: &str| {
        assert!(text.contains(needle), "the fixture changed: no {needle}");
        *text = text.replacen(needle, with, 1);
    };
    inject(
        &mut text,
        "\"HF_TOKEN\": \"REDACTED\"",
        &format!("\"HF_TOKEN\": \"REDACTED\", \"CMD\": \"env HF_TOKEN={} AWS_ACCESS_KEY_ID={} python run.py\"", secrets[0], secrets[1]),
    );
    inject(
        &mut text,
        "\"External id\": ",
        &format!(
            "\"launcher\": [\"torchrun\", \"--api-key\", \"{}\"], \"External id\": ",
            secrets[2]
        ),
    );
    inject(
        &mut text,
        "\"args\": {\n        \"name\": \"python3\"",
        "\"args\": {\n        \"name\": \"python3 DB_PASSWORD=procNameSecret99\"",
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("falconsai.json");
    std::fs::write(&trace, &text).unwrap();
    let (prof, kept) = (dir.path().join("prof"), dir.path().join("kept"));
    let note = String::from_utf8(ok(&["import", s(&trace), "-o", s(&prof)]).stderr).unwrap();
    ok(&["import", s(&trace), "-o", s(&kept), "--keep-secrets"]);
    let (redacted, unredacted) = (profile_texts(&prof), profile_texts(&kept));
    for secret in secrets {
        assert!(unredacted.contains(secret), "--keep-secrets lost {secret}");
        assert!(!redacted.contains(secret), "{secret} reached the profile");
        assert!(!note.contains(secret));
    }
    let info = String::from_utf8(strato(&["info", s(&prof)]).stdout).unwrap();
    for name in ["AWS_ACCESS_KEY_ID", "DB_PASSWORD", "HF_TOKEN"] {
        assert!(info.contains(name), "{name} not named in {info}");
    }
}
