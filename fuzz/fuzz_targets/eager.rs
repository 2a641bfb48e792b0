//! Eager decode: any bytes, both duplicate-key policies, a random nesting
//! limit.
//!
//! Input: `[policy, depth, text...]`. Checks that the eager walk
//! (`qjson::eager`, which reads the bytes itself instead of stage 1's
//! index) accepts exactly what `qjson_parse` accepts, and that what it
//! builds is the document `qjson_tape` describes: every value, every
//! member in order (repeats included), numbers bit for bit, and that a
//! chunk it calls distinct repeats no key. The sink keeps its values on a
//! stack as the Lua one does, containers taking theirs in chunks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson::eager::{self, Flow, Outcome, Scratch, Stack, Stop};
use qjson::navigate::ValueType;
use qjson_fuzz::{Doc, Tape, options, take};

/// A value as the sink builds it.
#[derive(Debug)]
enum V {
    Key(Vec<u8>),
    Leaf(Tape),
    /// A container: object or not, and its values so far (keys and values
    /// alternating for an object).
    Table(bool, Vec<V>),
    /// A container's place before its table is made.
    Slot,
}

struct Sink {
    strict: bool,
    stack: Vec<V>,
}

impl Sink {
    fn push(&mut self, v: V) -> Flow {
        self.stack.push(v);
        Ok(())
    }
}

impl Stack for Sink {
    fn key(&mut self, key: &[u8]) -> Flow {
        self.push(V::Key(key.to_vec()))
    }
    fn string(&mut self, s: &[u8]) -> Flow {
        self.push(V::Leaf(Tape::Str(s.to_vec())))
    }
    fn number(&mut self, n: f64) -> Flow {
        self.push(V::Leaf(Tape::Number(n.to_bits())))
    }
    fn boolean(&mut self, b: bool) -> Flow {
        let t = if b { ValueType::True } else { ValueType::False };
        self.push(V::Leaf(Tape::Node(t as i32, 0)))
    }
    fn null(&mut self) -> Flow {
        self.push(V::Leaf(Tape::Node(ValueType::Null as i32, 0)))
    }
    fn open(&mut self) -> Flow {
        self.push(V::Slot)
    }
    fn store(
        &mut self,
        object: bool,
        stored: u32,
        pending: u32,
        distinct: bool,
        _last: bool,
    ) -> Flow {
        let per = if object { 2 } else { 1 };
        let taken = self
            .stack
            .split_off(self.stack.len() - per * pending as usize);
        let slot = self.stack.last_mut().expect("a container's slot");
        if let V::Slot = slot {
            assert_eq!(stored, 0);
            *slot = V::Table(object, Vec::new());
        }
        let V::Table(is_object, values) = slot else {
            panic!("no container below its values");
        };
        assert_eq!((*is_object, values.len()), (object, per * stored as usize));
        if distinct {
            let keys: Vec<_> = taken.iter().step_by(2).collect();
            for (k, key) in keys.iter().enumerate() {
                assert!(
                    keys[..k]
                        .iter()
                        .all(|other| !matches!((other, key), (V::Key(a), V::Key(b)) if a == b)),
                    "a chunk said distinct repeats {key:?}"
                );
            }
        }
        for (k, v) in taken.into_iter().enumerate() {
            assert_eq!(
                object && k % 2 == 0,
                matches!(v, V::Key(_)),
                "keys and values alternate"
            );
            if self.strict && object && k % 2 == 0 {
                let V::Key(key) = &v else { unreachable!() };
                if values
                    .iter()
                    .step_by(2)
                    .any(|m| matches!(m, V::Key(m) if m == key))
                {
                    return Err(Stop::Invalid);
                }
            }
            values.push(v);
        }
        Ok(())
    }
}

/// The value in document order, as `qjson_tape` lists it.
fn flatten(v: &V, out: &mut Vec<Tape>) {
    match v {
        V::Key(k) => out.push(Tape::Str(k.clone())),
        V::Leaf(t) => out.push(t.clone()),
        V::Table(object, values) => {
            let (t, n) = if *object {
                (ValueType::Object, values.len() / 2)
            } else {
                (ValueType::Array, values.len())
            };
            out.push(Tape::Node(t as i32, n as u32));
            for v in values {
                flatten(v, out);
            }
        }
        V::Slot => panic!("a container never made"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(([policy, depth], text)) = take::<2>(data) else {
        return;
    };
    let (opts, policy, depth) = options(policy, depth);
    let mut sink = Sink {
        strict: policy == 1,
        stack: Vec::new(),
    };
    let outcome = eager::decode(text, &opts, &mut Scratch::default(), &mut sink);
    match (outcome, Doc::parse(text, depth, policy)) {
        (Outcome::Done, Ok(mut doc)) => {
            assert_eq!(sink.stack.len(), 1, "one value left");
            let mut got = Vec::new();
            flatten(&sink.stack[0], &mut got);
            assert_eq!(got, doc.tape(0).expect("the root's tape"), "values differ");
        }
        (Outcome::Invalid, Err(_)) => {}
        (outcome, parsed) => panic!("eager {outcome:?}, parse {:?}", parsed.map(drop)),
    }
});
