//! A reader of COM type libraries in the MSFT format (the binary `.tlb` MIDL and widl
//! write, also embedded as a `TYPELIB` resource in `.exe`, `.dll` and `.olb` files).
//!
//! Pure: bytes in, a [`Library`] out. The file is hostile until read: every offset and
//! count is checked against the bytes there are, type descriptions are followed to a
//! fixed depth, and what is read is held to a budget proportional to the input, so a bad
//! file is an [`Error`], never a panic or an unbounded allocation.
//!
//! The layout (little-endian): a header (`MSFT`, counts, the library's name, help string
//! and GUID), one offset per type info, a directory of 15 segments (type infos, import
//! infos, import files, references, GUID hash, GUIDs, name hash, names, strings, type
//! descriptions, array descriptions, custom data, custom-data GUIDs, two unknown), then
//! the segments. Each type info (100 bytes) points at a block of member records (one per
//! function, then one per variable) followed by arrays of member ids, name offsets and
//! record offsets.

use std::fmt;

/// Why a type library could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Neither an MSFT type library nor a PE file.
    NotTypeLib,
    /// A PE file without a `TYPELIB` resource.
    NoTypeLibResource,
    /// A PE file that could not be read.
    Pe(String),
    /// Something points outside the file, or a count does not fit it.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where, from the start of the type library.
        at: usize,
    },
    /// A value that cannot be.
    Bad {
        /// What was being read.
        what: &'static str,
        /// The value found.
        value: i64,
    },
    /// More members, parameters or text than a file of this size can honestly hold.
    TooLarge,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotTypeLib => f.write_str(
                "not a type library: neither an MSFT .tlb file nor a PE file (.exe, .dll, .olb)",
            ),
            Error::NoTypeLibResource => {
                f.write_str("the PE file has no TYPELIB resource (no type library inside)")
            }
            Error::Pe(e) => write!(f, "cannot read the PE file: {e}"),
            Error::Truncated { what, at } => {
                write!(
                    f,
                    "broken type library: {what} at byte {at} is outside the file"
                )
            }
            Error::Bad { what, value } => {
                write!(f, "broken type library: {what} is {value}")
            }
            Error::TooLarge => {
                f.write_str("broken type library: it describes far more than its size can hold")
            }
        }
    }
}

impl std::error::Error for Error {}

/// `VARENUM` values this reader names.
pub mod vt {
    #![allow(missing_docs)]
    pub const EMPTY: u16 = 0;
    pub const NULL: u16 = 1;
    pub const I2: u16 = 2;
    pub const I4: u16 = 3;
    pub const R4: u16 = 4;
    pub const R8: u16 = 5;
    pub const CY: u16 = 6;
    pub const DATE: u16 = 7;
    pub const BSTR: u16 = 8;
    pub const DISPATCH: u16 = 9;
    pub const ERROR: u16 = 10;
    pub const BOOL: u16 = 11;
    pub const VARIANT: u16 = 12;
    pub const UNKNOWN: u16 = 13;
    pub const DECIMAL: u16 = 14;
    pub const I1: u16 = 16;
    pub const UI1: u16 = 17;
    pub const UI2: u16 = 18;
    pub const UI4: u16 = 19;
    pub const I8: u16 = 20;
    pub const UI8: u16 = 21;
    pub const INT: u16 = 22;
    pub const UINT: u16 = 23;
    pub const VOID: u16 = 24;
    pub const HRESULT: u16 = 25;
    pub const PTR: u16 = 26;
    pub const SAFEARRAY: u16 = 27;
    pub const CARRAY: u16 = 28;
    pub const USERDEFINED: u16 = 29;
    pub const LPSTR: u16 = 30;
    pub const LPWSTR: u16 = 31;
}

/// `TYPEKIND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `TKIND_ENUM`.
    Enum,
    /// `TKIND_RECORD`.
    Record,
    /// `TKIND_MODULE`.
    Module,
    /// `TKIND_INTERFACE` (vtable only).
    Interface,
    /// `TKIND_DISPATCH`: a dispinterface, or a dual interface.
    Dispatch,
    /// `TKIND_COCLASS`.
    Coclass,
    /// `TKIND_ALIAS` (a typedef).
    Alias,
    /// `TKIND_UNION`.
    Union,
}

/// `TYPEFLAG_FCANCREATE`: instances can be created (`CoCreateInstance`).
pub const TYPEFLAG_FCANCREATE: u32 = 0x2;
/// `TYPEFLAG_FHIDDEN`.
pub const TYPEFLAG_FHIDDEN: u32 = 0x10;
/// `TYPEFLAG_FDUAL`.
pub const TYPEFLAG_FDUAL: u32 = 0x40;
/// `TYPEFLAG_FRESTRICTED`.
pub const TYPEFLAG_FRESTRICTED: u32 = 0x200;
/// `IMPLTYPEFLAG_FDEFAULT`.
pub const IMPLTYPEFLAG_FDEFAULT: u32 = 0x1;
/// `IMPLTYPEFLAG_FSOURCE` (an event interface).
pub const IMPLTYPEFLAG_FSOURCE: u32 = 0x2;
/// `FUNCFLAG_FRESTRICTED`.
pub const FUNCFLAG_FRESTRICTED: u16 = 0x1;
/// `FUNCFLAG_FHIDDEN`.
pub const FUNCFLAG_FHIDDEN: u16 = 0x40;
/// `PARAMFLAG_FIN`.
pub const PARAMFLAG_FIN: u16 = 0x1;
/// `PARAMFLAG_FOUT`.
pub const PARAMFLAG_FOUT: u16 = 0x2;
/// `PARAMFLAG_FLCID`.
pub const PARAMFLAG_FLCID: u16 = 0x4;
/// `PARAMFLAG_FRETVAL`.
pub const PARAMFLAG_FRETVAL: u16 = 0x8;
/// `PARAMFLAG_FOPT`.
pub const PARAMFLAG_FOPT: u16 = 0x10;
/// `PARAMFLAG_FHASDEFAULT`.
pub const PARAMFLAG_FHASDEFAULT: u16 = 0x20;

/// A type as written in the library (`TYPEDESC`).
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// A simple type: one `VARENUM` (`vt::BSTR`, `vt::I4`, …).
    Base(u16),
    /// `VT_PTR`: a pointer (a by-reference or out parameter, an interface pointer).
    Ptr(Box<Type>),
    /// `VT_SAFEARRAY` of an element type.
    SafeArray(Box<Type>),
    /// `VT_CARRAY`: a fixed C array.
    CArray,
    /// `VT_USERDEFINED`: another type info of this library (its index in
    /// [`Library::types`]).
    User(usize),
    /// `VT_USERDEFINED` from another library.
    Imported,
    /// Nested deeper than this reader follows.
    TooDeep,
}

/// A constant: a default value of a parameter, or the value of an enum member.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer (any integer `VARENUM`, `VT_BOOL` as 0/-1, `VT_ERROR`).
    Int(i64),
    /// `VT_R4`, `VT_R8`.
    Float(f64),
    /// `VT_BSTR`.
    Str(String),
    /// `VT_EMPTY`, `VT_NULL` or a null `BSTR`.
    Null,
    /// Another `VARENUM`, not read.
    Other(u16),
}

/// What a function is called for (`INVOKEKIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invoke {
    /// A method.
    Func,
    /// A property getter.
    PropertyGet,
    /// A property setter.
    PropertyPut,
    /// A property setter by reference.
    PropertyPutRef,
}

/// One parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name (absent in some libraries).
    pub name: Option<String>,
    /// Its type.
    pub ty: Type,
    /// `PARAMFLAG_*`.
    pub flags: u16,
    /// Its `[defaultvalue]`.
    pub default: Option<Value>,
}

/// One function (method or property accessor).
#[derive(Debug, Clone, PartialEq)]
pub struct Func {
    /// Its name.
    pub name: String,
    /// Its `MEMBERID` (DISPID).
    pub id: i32,
    /// Method or property accessor.
    pub invoke: Invoke,
    /// `FUNCFLAG_*`.
    pub flags: u16,
    /// The return type (`HRESULT` for vtable functions of a dual interface).
    pub ret: Type,
    /// The parameters, in order (including `[out, retval]` and `[lcid]` ones).
    pub params: Vec<Param>,
    /// The number of optional parameters (`cParamsOpt`; -1: a `vararg` list).
    pub optional: i16,
    /// Its `helpstring`.
    pub doc: Option<String>,
}

/// One variable: a dispinterface's property, an enum's member, a field.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    /// Its name.
    pub name: String,
    /// Its `MEMBERID`.
    pub id: i32,
    /// Its type.
    pub ty: Type,
    /// `VARFLAG_*`.
    pub flags: u16,
    /// `VARKIND`: 0 per instance, 1 static, 2 constant, 3 dispatch (a property).
    pub kind: u16,
    /// A constant's value.
    pub value: Option<Value>,
    /// Its `helpstring`.
    pub doc: Option<String>,
}

/// `VARFLAG_FREADONLY`.
pub const VARFLAG_FREADONLY: u16 = 0x1;
/// `VARFLAG_FHIDDEN`.
pub const VARFLAG_FHIDDEN: u16 = 0x40;
/// `VARFLAG_FRESTRICTED`.
pub const VARFLAG_FRESTRICTED: u16 = 0x80;

/// One implemented interface of a coclass (or the base of an interface).
#[derive(Debug, Clone, PartialEq)]
pub struct Impl {
    /// The interface: a type info of this library, or `None` when it is imported.
    pub ty: Option<usize>,
    /// `IMPLTYPEFLAG_*`.
    pub flags: u32,
}

/// One type info.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeInfo {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its GUID (`{…}`), when it has one.
    pub guid: Option<String>,
    /// `TYPEFLAG_*`.
    pub flags: u32,
    /// Its `helpstring`.
    pub doc: Option<String>,
    /// Functions.
    pub funcs: Vec<Func>,
    /// Variables.
    pub vars: Vec<Var>,
    /// Implemented interfaces (coclass) or base interface (interface, dispinterface).
    pub impls: Vec<Impl>,
    /// What an alias stands for.
    pub alias: Option<Type>,
}

/// A type library.
#[derive(Debug, Clone, PartialEq)]
pub struct Library {
    /// Its name (`library Acme`).
    pub name: String,
    /// Its GUID (`{…}`).
    pub guid: Option<String>,
    /// `version(major.minor)`.
    pub version: (u16, u16),
    /// Its `helpstring`.
    pub doc: Option<String>,
    /// Its type infos, in order.
    pub types: Vec<TypeInfo>,
}

/// How deep a type description is followed (`PTR` to `SAFEARRAY` to …).
const MAX_TYPE_DEPTH: u8 = 8;
/// The size of one type info record.
const TYPEINFO_SIZE: usize = 0x64;
/// The size of the header before the optional help DLL offset.
const HEADER_SIZE: usize = 0x54;
/// Segments in the directory.
const SEGMENTS: usize = 15;

/// Reads a type library: an MSFT `.tlb`, or a PE file (`.exe`, `.dll`, `.olb`) with a
/// `TYPELIB` resource (the one with the lowest id when there are several).
pub fn read(bytes: &[u8]) -> Result<Library, Error> {
    read_resource(bytes, None)
}

/// Reads a type library, from the `TYPELIB` resource `id` when `bytes` is a PE file (the
/// registry names one as `…\EXCEL.EXE\3`).
pub fn read_resource(bytes: &[u8], id: Option<u16>) -> Result<Library, Error> {
    if bytes.starts_with(b"MSFT") {
        parse(bytes)
    } else if bytes.starts_with(b"MZ") {
        parse(resource(bytes, id)?)
    } else {
        Err(Error::NotTypeLib)
    }
}

/// The `TYPELIB` resource `id` of a PE file (else the lowest id), first language.
pub fn resource(pe: &[u8], id: Option<u16>) -> Result<&[u8], Error> {
    use object::LittleEndian as LE;
    use object::pe::{ImageNtHeaders32, ImageNtHeaders64};
    use object::read::pe::{ImageNtHeaders, ResourceDirectoryEntryData, ResourceNameOrId};

    fn find<Pe: ImageNtHeaders>(data: &[u8], want: Option<u16>) -> Result<&[u8], Error> {
        let pe_err = |e: object::Error| Error::Pe(e.to_string());
        let file = object::read::pe::PeFile::<Pe>::parse(data).map_err(pe_err)?;
        let dirs = file.data_directories();
        let sections = file.section_table();
        let Some(dir) = dirs.resource_directory(data, &sections).map_err(pe_err)? else {
            return Err(Error::NoTypeLibResource);
        };
        let root = dir.root().map_err(pe_err)?;
        // The type level: named "TYPELIB".
        let mut typelib = None;
        for entry in root.entries {
            if let ResourceNameOrId::Name(name) = entry.name_or_id()
                && name
                    .to_string_lossy(dir)
                    .map_err(pe_err)?
                    .eq_ignore_ascii_case("TYPELIB")
            {
                typelib = Some(entry);
                break;
            }
        }
        let Some(typelib) = typelib else {
            return Err(Error::NoTypeLibResource);
        };
        let ResourceDirectoryEntryData::Table(ids) = typelib.data(dir).map_err(pe_err)? else {
            return Err(Error::NoTypeLibResource);
        };
        // The id level: the lowest numeric id, else the first name.
        let mut best: Option<(u32, _)> = None;
        for entry in ids.entries {
            let key = match entry.name_or_id() {
                ResourceNameOrId::Id(id) if want.is_none_or(|w| w == id) => u32::from(id),
                ResourceNameOrId::Name(_) if want.is_none() => u32::MAX,
                _ => continue,
            };
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, entry));
            }
        }
        let Some((_, entry)) = best else {
            return Err(Error::NoTypeLibResource);
        };
        // The language level, then the data.
        let mut data_entry = None;
        let mut level = entry.data(dir).map_err(pe_err)?;
        for _ in 0..2 {
            match level {
                ResourceDirectoryEntryData::Data(d) => {
                    data_entry = Some(d);
                    break;
                }
                ResourceDirectoryEntryData::Table(t) => {
                    let Some(first) = t.entries.first() else {
                        return Err(Error::NoTypeLibResource);
                    };
                    level = first.data(dir).map_err(pe_err)?;
                }
            }
        }
        let Some(d) = data_entry else {
            return Err(Error::NoTypeLibResource);
        };
        let rva = d.offset_to_data.get(LE);
        let size = d.size.get(LE) as usize;
        let (offset, available) = sections.pe_file_range_at(rva).ok_or(Error::Pe(
            "the TYPELIB resource is outside every section".into(),
        ))?;
        let len = size.min(available as usize);
        data.get(offset as usize..)
            .and_then(|d| d.get(..len))
            .ok_or(Error::Pe("the TYPELIB resource is outside the file".into()))
    }

    match object::FileKind::parse(pe) {
        Ok(object::FileKind::Pe32) => find::<ImageNtHeaders32>(pe, id),
        Ok(object::FileKind::Pe64) => find::<ImageNtHeaders64>(pe, id),
        Ok(_) | Err(_) => Err(Error::NotTypeLib),
    }
}

/// The bytes of the file, read with bounds checks.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn slice(&self, at: usize, len: usize, what: &'static str) -> Result<&'a [u8], Error> {
        at.checked_add(len)
            .and_then(|end| self.0.get(at..end))
            .ok_or(Error::Truncated { what, at })
    }
    fn u16(&self, at: usize, what: &'static str) -> Result<u16, Error> {
        let b = self.slice(at, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn i16(&self, at: usize, what: &'static str) -> Result<i16, Error> {
        Ok(self.u16(at, what)? as i16)
    }
    fn i32(&self, at: usize, what: &'static str) -> Result<i32, Error> {
        let b = self.slice(at, 4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// An offset read from the file: `None` for -1 (absent), an error for another negative.
fn offset(value: i32, what: &'static str) -> Result<Option<usize>, Error> {
    match value {
        -1 => Ok(None),
        v if v < 0 => Err(Error::Bad {
            what,
            value: i64::from(v),
        }),
        v => Ok(Some(v as usize)),
    }
}

/// One segment of the directory.
#[derive(Clone, Copy, Default)]
struct Segment {
    at: usize,
    len: usize,
}

/// What has been allocated, against what the input allows.
struct Budget {
    left: usize,
}

impl Budget {
    fn take(&mut self, n: usize) -> Result<(), Error> {
        self.left = self.left.checked_sub(n).ok_or(Error::TooLarge)?;
        Ok(())
    }
}

struct Reader<'a> {
    b: Bytes<'a>,
    seg: [Segment; SEGMENTS],
    budget: Budget,
    ntypes: usize,
}

const SEG_TYPEINFO: usize = 0;
const SEG_REFS: usize = 3;
const SEG_GUIDS: usize = 5;
const SEG_NAMES: usize = 7;
const SEG_STRINGS: usize = 8;
const SEG_TYPEDESC: usize = 9;
const SEG_CUSTDATA: usize = 11;

/// Parses an MSFT type library.
pub fn parse(bytes: &[u8]) -> Result<Library, Error> {
    let b = Bytes(bytes);
    if b.slice(0, 4, "the magic number")? != b"MSFT" {
        return Err(Error::NotTypeLib);
    }
    let posguid = b.i32(0x08, "the header")?;
    let varflags = b.i32(0x14, "the header")?;
    let version = b.i32(0x18, "the header")?;
    let ntypes = b.i32(0x20, "the header")?;
    let helpstring = b.i32(0x24, "the header")?;
    let name_offset = b.i32(0x38, "the header")?;
    let ntypes = usize::try_from(ntypes).map_err(|_| Error::Bad {
        what: "the number of type infos",
        value: i64::from(ntypes),
    })?;
    let mut at = HEADER_SIZE;
    if varflags & 0x100 != 0 {
        at += 4; // the help DLL's string
    }
    // One offset per type info, then the directory.
    let dir = ntypes
        .checked_mul(4)
        .and_then(|n| n.checked_add(at))
        .ok_or(Error::TooLarge)?;
    b.slice(dir, SEGMENTS * 16, "the segment directory")?;
    let mut seg = [Segment::default(); SEGMENTS];
    for (i, s) in seg.iter_mut().enumerate() {
        let o = b.i32(dir + i * 16, "the segment directory")?;
        let len = b.i32(dir + i * 16 + 4, "the segment directory")?;
        if o == -1 || len <= 0 {
            continue;
        }
        let (Ok(o), Ok(len)) = (usize::try_from(o), usize::try_from(len)) else {
            return Err(Error::Bad {
                what: "a segment's offset",
                value: i64::from(o),
            });
        };
        b.slice(o, len, "a segment")?;
        *s = Segment { at: o, len };
    }
    if seg[SEG_TYPEINFO].len < ntypes.saturating_mul(TYPEINFO_SIZE) {
        return Err(Error::Truncated {
            what: "the type info table",
            at: seg[SEG_TYPEINFO].at,
        });
    }
    let mut r = Reader {
        b,
        seg,
        // Text and records: a few times the input, plus room for a small file.
        budget: Budget {
            left: bytes.len().saturating_mul(16).saturating_add(1 << 20),
        },
        ntypes,
    };
    let name = r.name(name_offset)?.unwrap_or_default();
    let doc = r.string(helpstring)?;
    let guid = r.guid(posguid)?;
    let mut types = Vec::new();
    for i in 0..ntypes {
        r.budget.take(std::mem::size_of::<TypeInfo>())?;
        types.push(r.typeinfo(seg[SEG_TYPEINFO].at + i * TYPEINFO_SIZE)?);
    }
    Ok(Library {
        name,
        guid,
        version: ((version & 0xffff) as u16, ((version >> 16) & 0xffff) as u16),
        doc,
        types,
    })
}

impl<'a> Reader<'a> {
    /// Text as the library wrote it: UTF-8, else Latin-1.
    fn text(&mut self, raw: &[u8]) -> Result<String, Error> {
        self.budget.take(raw.len() * 2 + 16)?;
        Ok(match std::str::from_utf8(raw) {
            Ok(s) => s.to_owned(),
            Err(_) => raw.iter().map(|&c| char::from(c)).collect(),
        })
    }

    /// A name of the name table.
    fn name(&mut self, at: i32) -> Result<Option<String>, Error> {
        let Some(at) = offset(at, "a name's offset")? else {
            return Ok(None);
        };
        let seg = self.seg[SEG_NAMES];
        let truncated = Error::Truncated {
            what: "a name",
            at: seg.at.saturating_add(at),
        };
        if at.saturating_add(12) > seg.len {
            return Err(truncated);
        }
        let n = (self.b.i32(seg.at + at + 8, "a name")? & 0xff) as usize;
        if at + 12 + n > seg.len {
            return Err(truncated);
        }
        let raw = self.b.slice(seg.at + at + 12, n, "a name")?;
        self.text(raw).map(Some)
    }

    /// A string of the string table (help strings).
    fn string(&mut self, at: i32) -> Result<Option<String>, Error> {
        let Some(at) = offset(at, "a string's offset")? else {
            return Ok(None);
        };
        let seg = self.seg[SEG_STRINGS];
        if at.saturating_add(2) > seg.len {
            return Err(Error::Truncated {
                what: "a string",
                at: seg.at + at,
            });
        }
        let n = self.b.u16(seg.at + at, "a string")? as usize;
        if at + 2 + n > seg.len {
            return Err(Error::Truncated {
                what: "a string",
                at: seg.at + at,
            });
        }
        let raw = self.b.slice(seg.at + at + 2, n, "a string")?;
        let s = self.text(raw)?;
        Ok((!s.trim().is_empty()).then_some(s))
    }

    /// A GUID of the GUID table, as `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}`.
    fn guid(&mut self, at: i32) -> Result<Option<String>, Error> {
        let Some(at) = offset(at, "a GUID's offset")? else {
            return Ok(None);
        };
        let seg = self.seg[SEG_GUIDS];
        if at.saturating_add(16) > seg.len {
            return Err(Error::Truncated {
                what: "a GUID",
                at: seg.at + at,
            });
        }
        let g = self.b.slice(seg.at + at, 16, "a GUID")?;
        self.budget.take(40)?;
        Ok(Some(format!(
            "{{{:08X}-{:04X}-{:04X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}}}",
            u32::from_le_bytes([g[0], g[1], g[2], g[3]]),
            u16::from_le_bytes([g[4], g[5]]),
            u16::from_le_bytes([g[6], g[7]]),
            g[8],
            g[9],
            g[10],
            g[11],
            g[12],
            g[13],
            g[14],
            g[15]
        )))
    }

    /// A reference to another type info (`HREFTYPE`).
    fn href(&self, href: i32) -> Option<usize> {
        // In this file: a multiple of the type info size (low bits clear).
        (href >= 0 && href & 3 == 0)
            .then_some(href as usize / TYPEINFO_SIZE)
            .filter(|&i| i < self.ntypes)
    }

    /// A type: a simple `VARENUM` packed in a negative number, else an offset into the
    /// type description table.
    fn ty(&mut self, encoded: i32, depth: u8) -> Result<Type, Error> {
        if encoded < 0 {
            return Ok(Type::Base((encoded & 0x0fff) as u16));
        }
        if depth >= MAX_TYPE_DEPTH {
            return Ok(Type::TooDeep);
        }
        let seg = self.seg[SEG_TYPEDESC];
        let at = encoded as usize;
        if at.saturating_add(8) > seg.len {
            return Err(Error::Truncated {
                what: "a type description",
                at: seg.at + at,
            });
        }
        let vt = self.b.u16(seg.at + at, "a type description")? & 0x0fff;
        let lo = self.b.i16(seg.at + at + 4, "a type description")?;
        let hi = self.b.i16(seg.at + at + 6, "a type description")?;
        self.budget.take(32)?;
        Ok(match vt {
            vt::PTR | vt::SAFEARRAY => {
                let inner = if hi < 0 {
                    Type::Base((lo as u16) & 0x0fff)
                } else {
                    let target = (i32::from(hi) << 16) | i32::from(lo as u16);
                    self.ty(target, depth + 1)?
                };
                if vt == vt::PTR {
                    Type::Ptr(Box::new(inner))
                } else {
                    Type::SafeArray(Box::new(inner))
                }
            }
            vt::CARRAY => Type::CArray,
            vt::USERDEFINED => {
                let href = (i32::from(hi) << 16) | i32::from(lo as u16);
                self.href(href).map_or(Type::Imported, Type::User)
            }
            other => Type::Base(other),
        })
    }

    /// A constant: packed in a negative number (a small integer), else in the custom
    /// data table.
    fn value(&mut self, encoded: i32) -> Result<Value, Error> {
        if encoded < 0 {
            let v = ((encoded as u32 & 0x7c00_0000) >> 26) as u16;
            let n = i64::from(encoded & 0x03ff_ffff);
            return Ok(match v {
                vt::EMPTY | vt::NULL => Value::Null,
                vt::BOOL => Value::Int(if n == 0 { 0 } else { -1 }),
                _ => Value::Int(n),
            });
        }
        let seg = self.seg[SEG_CUSTDATA];
        let at = encoded as usize;
        let end = |n: usize| -> Result<usize, Error> {
            let e = at.checked_add(n).ok_or(Error::TooLarge)?;
            if e > seg.len {
                return Err(Error::Truncated {
                    what: "a constant",
                    at: seg.at + at,
                });
            }
            Ok(seg.at + at)
        };
        let base = end(2)?;
        let v = self.b.u16(base, "a constant")?;
        let data = base + 2;
        let int = |r: &Self, n: usize| -> Result<&'a [u8], Error> {
            end(2 + n)?;
            r.b.slice(data, n, "a constant")
        };
        Ok(match v {
            vt::EMPTY | vt::NULL => Value::Null,
            vt::I1 => Value::Int(i64::from(int(self, 1)?[0] as i8)),
            vt::UI1 => Value::Int(i64::from(int(self, 1)?[0])),
            vt::I2 | vt::BOOL => {
                let b = int(self, 2)?;
                Value::Int(i64::from(i16::from_le_bytes([b[0], b[1]])))
            }
            vt::UI2 => {
                let b = int(self, 2)?;
                Value::Int(i64::from(u16::from_le_bytes([b[0], b[1]])))
            }
            vt::I4 | vt::INT | vt::ERROR | vt::HRESULT => {
                let b = int(self, 4)?;
                Value::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            vt::UI4 | vt::UINT => {
                let b = int(self, 4)?;
                Value::Int(i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            vt::I8 | vt::UI8 => {
                let b = int(self, 8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Int(i64::from_le_bytes(a))
            }
            vt::R4 => {
                let b = int(self, 4)?;
                Value::Float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            vt::R8 => {
                let b = int(self, 8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Float(f64::from_le_bytes(a))
            }
            vt::BSTR => {
                let b = int(self, 4)?;
                let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if n == -1 {
                    Value::Null
                } else {
                    let n = usize::try_from(n).map_err(|_| Error::Bad {
                        what: "a string constant's length",
                        value: i64::from(n),
                    })?;
                    let raw = &int(self, 4 + n)?[4..];
                    Value::Str(self.text(raw)?)
                }
            }
            other => Value::Other(other),
        })
    }

    fn typeinfo(&mut self, at: usize) -> Result<TypeInfo, Error> {
        let field = |r: &Self, o: usize| r.b.i32(at + o, "a type info");
        let typekind = field(self, 0x00)?;
        let memoffset = field(self, 0x04)?;
        let elements = field(self, 0x18)?;
        let posguid = field(self, 0x2c)?;
        let flags = field(self, 0x30)? as u32;
        let name = field(self, 0x34)?;
        let docstring = field(self, 0x3c)?;
        let impl_count = self.b.i16(at + 0x4c, "a type info")?;
        let datatype1 = field(self, 0x54)?;
        let kind = match typekind & 0xf {
            0 => Kind::Enum,
            1 => Kind::Record,
            2 => Kind::Module,
            3 => Kind::Interface,
            4 => Kind::Dispatch,
            5 => Kind::Coclass,
            6 => Kind::Alias,
            7 => Kind::Union,
            other => {
                return Err(Error::Bad {
                    what: "a type info's kind",
                    value: i64::from(other),
                });
            }
        };
        let name = self.name(name)?.unwrap_or_default();
        let doc = self.string(docstring)?;
        let guid = self.guid(posguid)?;
        let nfuncs = (elements & 0xffff) as usize;
        let nvars = ((elements >> 16) & 0xffff) as usize;
        let (funcs, vars) = if nfuncs + nvars > 0 {
            let Some(block) = offset(memoffset, "a type info's member offset")? else {
                return Err(Error::Bad {
                    what: "a type info's member offset",
                    value: -1,
                });
            };
            self.members(block, nfuncs, nvars)?
        } else {
            (Vec::new(), Vec::new())
        };
        let mut impls = Vec::new();
        let mut alias = None;
        match kind {
            Kind::Coclass => {
                let seg = self.seg[SEG_REFS];
                let mut next = datatype1;
                for _ in 0..impl_count.max(0) {
                    let Ok(o) = usize::try_from(next) else { break };
                    if o.saturating_add(16) > seg.len {
                        return Err(Error::Truncated {
                            what: "a coclass's interface",
                            at: seg.at + o,
                        });
                    }
                    let href = self.b.i32(seg.at + o, "a coclass's interface")?;
                    let flags = self.b.i32(seg.at + o + 4, "a coclass's interface")? as u32;
                    next = self.b.i32(seg.at + o + 12, "a coclass's interface")?;
                    self.budget.take(16)?;
                    impls.push(Impl {
                        ty: self.href(href),
                        flags,
                    });
                }
            }
            Kind::Interface | Kind::Dispatch if impl_count > 0 => {
                impls.push(Impl {
                    ty: self.href(datatype1),
                    flags: 0,
                });
            }
            Kind::Alias => alias = Some(self.ty(datatype1, 0)?),
            _ => {}
        }
        Ok(TypeInfo {
            kind,
            name,
            guid,
            flags,
            doc,
            funcs,
            vars,
            impls,
            alias,
        })
    }

    /// The member block at `block`: `[length][records…][ids][names][record offsets]`.
    fn members(
        &mut self,
        block: usize,
        nfuncs: usize,
        nvars: usize,
    ) -> Result<(Vec<Func>, Vec<Var>), Error> {
        let infolen = self.b.i32(block, "a member block")?;
        let infolen = usize::try_from(infolen).map_err(|_| Error::Bad {
            what: "a member block's length",
            value: i64::from(infolen),
        })?;
        let records = block + 4;
        let n = nfuncs + nvars;
        let arrays = records.checked_add(infolen).ok_or(Error::TooLarge)?;
        // The three arrays must be there, whole, before anything is allocated for them.
        self.b.slice(arrays, n * 12, "a member block's arrays")?;
        let records_end = arrays;
        let array =
            |r: &Self, which: usize, i: usize| r.b.i32(arrays + (which * n + i) * 4, "a member");
        let mut funcs = Vec::new();
        let mut at = records;
        for i in 0..nfuncs {
            self.budget.take(std::mem::size_of::<Func>())?;
            let id = array(self, 0, i)?;
            let name_at = array(self, 1, i)?;
            let (func, len) = self.func(at, records_end, id, name_at, funcs.last())?;
            funcs.push(func);
            at += len;
        }
        let mut vars = Vec::new();
        if nvars > 0 {
            let first = array(self, 2, nfuncs)?;
            let first = usize::try_from(first).map_err(|_| Error::Bad {
                what: "a variable's record offset",
                value: i64::from(first),
            })?;
            let mut at = records.checked_add(first).ok_or(Error::TooLarge)?;
            for i in nfuncs..n {
                self.budget.take(std::mem::size_of::<Var>())?;
                let id = array(self, 0, i)?;
                let name_at = array(self, 1, i)?;
                let (var, len) = self.var(at, records_end, id, name_at)?;
                vars.push(var);
                at += len;
            }
        }
        Ok((funcs, vars))
    }

    /// A record's length (its first field), checked against the block.
    fn record(&self, at: usize, end: usize, mask: i32, min: usize) -> Result<usize, Error> {
        let len = (self.b.i32(at, "a member record")? & mask) as usize;
        if len < min || at + len > end {
            return Err(Error::Bad {
                what: "a member record's length",
                value: len as i64,
            });
        }
        Ok(len)
    }

    fn func(
        &mut self,
        at: usize,
        end: usize,
        id: i32,
        name_at: i32,
        prev: Option<&Func>,
    ) -> Result<(Func, usize), Error> {
        let len = self.record(at, end, 0xffff, 24)?;
        let f = |r: &Self, o: usize| r.b.i32(at + o, "a function");
        let datatype = f(self, 4)?;
        let flags = (f(self, 8)? & 0xffff) as u16;
        let fkccic = f(self, 16)?;
        let nargs = self.b.i16(at + 20, "a function")?;
        let nopt = self.b.i16(at + 22, "a function")?;
        let nargs = usize::try_from(nargs).map_err(|_| Error::Bad {
            what: "a function's parameter count",
            value: i64::from(nargs),
        })?;
        let has_defaults = fkccic & 0x1000 != 0;
        let per_arg = if has_defaults { 16 } else { 12 };
        let fixed = len
            .checked_sub(nargs * per_arg)
            .filter(|&n| n >= 24)
            .ok_or(Error::Bad {
                what: "a function's parameter count",
                value: nargs as i64,
            })?;
        let invoke = match (fkccic >> 3) & 0xf {
            2 => Invoke::PropertyGet,
            4 => Invoke::PropertyPut,
            8 => Invoke::PropertyPutRef,
            _ => Invoke::Func,
        };
        let doc = if fixed > 28 {
            let s = f(self, 28)?;
            self.string(s)?
        } else {
            None
        };
        let name = match self.name(name_at)? {
            Some(n) => n,
            // The second half of a get/put pair may share the first's name.
            None => match prev {
                Some(p) if p.invoke != Invoke::Func && invoke != Invoke::Func => p.name.clone(),
                _ => String::new(),
            },
        };
        let ret = self.ty(datatype, 0)?;
        let infos = at + len - nargs * 12;
        let defaults = at + len - nargs * 16;
        let mut params = Vec::new();
        for j in 0..nargs {
            self.budget.take(std::mem::size_of::<Param>())?;
            let p = infos + j * 12;
            let ty = self.b.i32(p, "a parameter")?;
            let pname = self.b.i32(p + 4, "a parameter")?;
            let pflags = (self.b.i32(p + 8, "a parameter")? & 0xffff) as u16;
            let default = if has_defaults && pflags & PARAMFLAG_FHASDEFAULT != 0 {
                let v = self.b.i32(defaults + j * 4, "a default value")?;
                Some(self.value(v)?)
            } else {
                None
            };
            params.push(Param {
                name: self.name(pname)?,
                ty: self.ty(ty, 0)?,
                flags: pflags,
                default,
            });
        }
        Ok((
            Func {
                name,
                id,
                invoke,
                flags,
                ret,
                params,
                optional: nopt,
                doc,
            },
            len,
        ))
    }

    fn var(&mut self, at: usize, end: usize, id: i32, name_at: i32) -> Result<(Var, usize), Error> {
        let len = self.record(at, end, 0xff, 20)?;
        let datatype = self.b.i32(at + 4, "a variable")?;
        let flags = (self.b.i32(at + 8, "a variable")? & 0xffff) as u16;
        let kind = self.b.u16(at + 12, "a variable")?;
        let offs_value = self.b.i32(at + 16, "a variable")?;
        let doc = if len > 24 {
            let s = self.b.i32(at + 24, "a variable")?;
            self.string(s)?
        } else {
            None
        };
        let value = if kind == 2 {
            Some(self.value(offs_value)?)
        } else {
            None
        };
        Ok((
            Var {
                name: self.name(name_at)?.unwrap_or_default(),
                id,
                ty: self.ty(datatype, 0)?,
                flags,
                kind,
                value,
                doc,
            },
            len,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTLOOK: &[u8] = include_bytes!("../../../fixtures/typelib/outlook.tlb");
    const OUTLOOK_DLL: &[u8] = include_bytes!("../../../fixtures/typelib/outlook.dll");
    const EXCEL: &[u8] = include_bytes!("../../../fixtures/typelib/excel.tlb");

    #[test]
    fn reads_what_widl_wrote() {
        let lib = read(OUTLOOK).unwrap();
        assert_eq!(
            lib.guid.as_deref(),
            Some("{5A1B0000-0000-4000-8000-00000000A001}")
        );
        assert_eq!(lib.doc.as_deref(), Some("Acme Mail Object Library"));
        let app = lib.types.iter().find(|t| t.name == "_Application").unwrap();
        assert_eq!(app.kind, Kind::Dispatch);
        assert_eq!(app.vars.len(), 4);
        assert_eq!(app.vars[0].name, "Version");
        assert_eq!(app.vars[0].ty, Type::Base(vt::BSTR));
        assert_eq!(app.vars[0].flags & VARFLAG_FREADONLY, VARFLAG_FREADONLY);
        let send = app.funcs.iter().find(|f| f.name == "SendMail").unwrap();
        assert_eq!(send.id, 10);
        assert_eq!(send.ret, Type::Base(vt::BOOL));
        assert_eq!(send.params.len(), 5);
        assert_eq!(send.params[3].flags & PARAMFLAG_FOPT, PARAMFLAG_FOPT);
        assert_eq!(send.params[4].default, Some(Value::Int(0)));
        let kinds: Vec<Kind> = lib.types.iter().map(|t| t.kind).collect();
        assert!(kinds.contains(&Kind::Enum) && kinds.contains(&Kind::Coclass));
        let items = lib.types.iter().find(|t| t.name == "OlItemType").unwrap();
        let values: Vec<_> = items.vars.iter().map(|v| v.value.clone()).collect();
        assert_eq!(
            values,
            [
                Some(Value::Int(0)),
                Some(Value::Int(1)),
                Some(Value::Int(2))
            ]
        );

        let lib = read(EXCEL).unwrap();
        let app = lib.types.iter().find(|t| t.name == "_Application").unwrap();
        assert_eq!(app.flags & TYPEFLAG_FDUAL, TYPEFLAG_FDUAL);
        let visible: Vec<Invoke> = app
            .funcs
            .iter()
            .filter(|f| f.name == "Visible")
            .map(|f| f.invoke)
            .collect();
        assert_eq!(visible, [Invoke::PropertyGet, Invoke::PropertyPut]);
        let save = app.funcs.iter().find(|f| f.name == "SaveAs").unwrap();
        assert_eq!(save.params[1].default, Some(Value::Int(51)));
        assert!(matches!(save.params[1].ty, Type::User(_)));
        let normal = lib.types.iter().find(|t| t.name == "XlFileFormat").unwrap();
        assert!(
            normal
                .vars
                .iter()
                .any(|v| v.value == Some(Value::Int(-4143)))
        );
    }

    #[test]
    fn the_typelib_resource_of_a_pe_file_is_the_same_library() {
        assert_eq!(resource(OUTLOOK_DLL, None).unwrap(), OUTLOOK);
        assert_eq!(resource(OUTLOOK_DLL, Some(1)).unwrap(), OUTLOOK);
        assert_eq!(
            resource(OUTLOOK_DLL, Some(2)).unwrap_err(),
            Error::NoTypeLibResource
        );
        assert_eq!(read(OUTLOOK_DLL).unwrap(), read(OUTLOOK).unwrap());
        // The same DLL whose resource type is named otherwise has no type library.
        let needle: Vec<u8> = "TYPELIB"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let mut other = OUTLOOK_DLL.to_vec();
        let at = other
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap();
        other[at] = b'X';
        assert_eq!(read(&other).unwrap_err(), Error::NoTypeLibResource);
    }

    #[test]
    fn what_is_no_type_library_says_so() {
        assert_eq!(read(b"").unwrap_err(), Error::NotTypeLib);
        assert_eq!(read(b"PK\x03\x04").unwrap_err(), Error::NotTypeLib);
        assert!(matches!(read(b"MSFT"), Err(Error::Truncated { .. })));
        assert!(read(b"MZ\0\0garbage").is_err());
        let text = read(b"MSFT").unwrap_err().to_string();
        assert!(text.starts_with("broken type library"), "{text}");
    }

    /// A small deterministic generator (no dependency).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Truncated and mutated libraries and PE files give an error or a library, never a
    /// panic, and never more than the budget allows.
    #[test]
    fn hostile_inputs_are_errors_not_panics() {
        let iters: usize = std::env::var("AAI_FUZZ_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut ok, mut failed) = (0, 0);
        for input in [OUTLOOK, EXCEL, OUTLOOK_DLL] {
            for len in 0..input.len() {
                let _ = read(&input[..len]);
            }
            for _ in 0..iters {
                let mut bytes = input.to_vec();
                for _ in 0..=rng.below(8) {
                    let at = rng.below(bytes.len());
                    bytes[at] = match rng.below(4) {
                        0 => 0xff,
                        1 => 0x00,
                        2 => 0x7f,
                        _ => rng.next() as u8,
                    };
                }
                match read(&bytes) {
                    Ok(lib) => {
                        ok += 1;
                        let _ = crate::com::drafts(&lib, crate::com::Options::default());
                    }
                    Err(_) => failed += 1,
                }
            }
        }
        assert!(ok > 0 && failed > 0, "ok {ok}, failed {failed}");
    }

    #[test]
    fn counts_that_do_not_fit_the_file_are_errors() {
        // Huge type info count.
        let mut bytes = OUTLOOK.to_vec();
        bytes[0x20..0x24].copy_from_slice(&0x7fff_ffffi32.to_le_bytes());
        assert!(read(&bytes).is_err());
        // A member count of 65535 functions and variables in the first type info.
        let mut bytes = OUTLOOK.to_vec();
        let dir = HEADER_SIZE + 4 * 4;
        let tab = i32::from_le_bytes(bytes[dir..dir + 4].try_into().unwrap()) as usize;
        bytes[tab + 0x18..tab + 0x1c].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(read(&bytes).is_err());
    }
}
