//! Eager decode: any bytes, both duplicate-key policies, a random nesting
//! limit.
//!
//! Input: `[policy, depth, text...]`. Checks that the eager walk
//! (`qjson::eager`, which reads the bytes itself instead of stage 1's
//! index) accepts exactly what `qjson_parse` accepts, and that what it
//! builds is the document `qjson_tape` describes: every value, every
//! member in order (repeats included), numbers bit for bit, and that a
//! chunk it calls distinct repeats no key. The sink keeps its values on a
//! stack as the Lua one does, containers taking theirs in chunks. Then
//! that decode by shape (`qjson::eager::shape`) refuses what the walk
//! refuses, and that a shape and values it gives describe that document.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson::eager::shape::{self, Shaped, Shapes};
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

/// Appends to `tape` the value at `at` in `shape`, whose strings and
/// numbers `out` holds from `strings` and `numbers` on; moves all three
/// past it.
fn shape_tape(
    shape: &[u8],
    out: &Shaped,
    at: &mut usize,
    (strings, numbers): (&mut usize, &mut usize),
    tape: &mut Vec<Tape>,
) {
    let b = shape[*at];
    *at += 1;
    let leaf = |t: ValueType| Tape::Node(t as i32, 0);
    match b {
        b's' => {
            // SAFETY: string `strings` of the decode that filled `out`,
            // the last on this thread, whose text is alive.
            let s = unsafe {
                core::slice::from_raw_parts(out.string[*strings], out.string_len[*strings] as usize)
            };
            tape.push(Tape::Str(s.to_vec()));
            *strings += 1;
        }
        b'n' => {
            tape.push(Tape::Number(out.number[*numbers].to_bits()));
            *numbers += 1;
        }
        b't' => tape.push(leaf(ValueType::True)),
        b'f' => tape.push(leaf(ValueType::False)),
        b'z' => tape.push(leaf(ValueType::Null)),
        b'{' | b'[' => {
            let (kind, close) = if b == b'{' {
                (ValueType::Object, b'}')
            } else {
                (ValueType::Array, b']')
            };
            let node = tape.len();
            tape.push(Tape::Node(kind as i32, 0));
            let mut count = 0;
            while shape[*at] != close {
                if b == b'{' {
                    assert_eq!(shape[*at], b'k', "a member without its key");
                    let len = usize::from(shape[*at + 1]);
                    tape.push(Tape::Str(shape[*at + 2..*at + 2 + len].to_vec()));
                    *at += 2 + len;
                }
                shape_tape(shape, out, at, (&mut *strings, &mut *numbers), tape);
                count += 1;
            }
            *at += 1;
            tape[node] = Tape::Node(kind as i32, count);
        }
        _ => panic!("byte {b} in a shape"),
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
    let (mut shapes, mut out) = (Shapes::default(), Box::<Shaped>::default());
    let id = shape::decode(text, &opts, &mut shapes, &mut out);
    match (outcome, Doc::parse(text, depth, policy)) {
        (Outcome::Done, Ok(mut doc)) => {
            assert_eq!(sink.stack.len(), 1, "one value left");
            let mut got = Vec::new();
            flatten(&sink.stack[0], &mut got);
            let want = doc.tape(0).expect("the root's tape");
            assert_eq!(got, want, "values differ");
            if id != 0 {
                // SAFETY: the shape of a decode that gave an id, alive
                // with its registry (`shapes`).
                let shape =
                    unsafe { core::slice::from_raw_parts(out.shape, out.shape_len as usize) };
                let (mut at, mut strings, mut numbers) = (0, 0, 0);
                let mut by_shape = Vec::new();
                shape_tape(
                    shape,
                    &out,
                    &mut at,
                    (&mut strings, &mut numbers),
                    &mut by_shape,
                );
                assert_eq!(at, shape.len(), "bytes left in the shape");
                assert_eq!(by_shape, want, "the shape's values differ");
            }
        }
        (Outcome::Invalid, Err(_)) => assert_eq!(id, 0, "a shape of an invalid text"),
        (outcome, parsed) => panic!("eager {outcome:?}, parse {:?}", parsed.map(drop)),
    }
});
