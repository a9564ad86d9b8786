"""Disassembly helpers shared by the tests: binutils objdump is the oracle the counting
clients and the closed-form counts are checked against."""
import re
import subprocess

OBJDUMP = "aarch64-linux-gnu-objdump"
NM = "aarch64-linux-gnu-nm"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def objdump_words(words, tmp):
    """Disassemble 32-bit words; returns [(word, mnemonic, operands)] with
    mnemonic None for encodings objdump calls undefined."""
    f = tmp / "words.bin"
    f.write_bytes(b"".join(w.to_bytes(4, "little") for w in words))
    r = run([OBJDUMP, "-D", "-b", "binary", "-m", "aarch64", str(f)])
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        addr, word, mnem, ops = int(m[1], 16), int(m[2], 16), m[3], m[4]
        if mnem == ".inst" or "undefined" in ops:
            mnem = None
        out[addr // 4] = (word, mnem, ops.split("//")[0].split(";")[0].strip())
    return [out[i] for i in range(len(words))]


BRANCHES = {"b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz",
            "eret", "drps", "braa", "brab", "blraa", "blrab", "braaz",
            "brabz", "blraaz", "blrabz", "retaa", "retab", "eretaa", "eretab"}
SVE_REDUCE = {"saddv", "uaddv", "smaxv", "sminv", "umaxv", "uminv", "andv",
              "orv", "eorv", "faddv", "fadda", "fmaxv", "fminv", "fmaxnmv",
              "fminnmv"}
FPREG = re.compile(r"^\{?\s*(v\d+|[qdshb]\d+)\b")
ANYFP = re.compile(r"(?<![\w.])(v\d+|[qdshb]\d+)\b")


def expected_class(word, mnem, ops):
    """The class an instruction belongs to, judged from objdump's text."""
    if (word & 0x1e000000) == 0x04000000:
        addr = re.search(r"\[([^\]]*)\]", ops)
        vec_addr = bool(addr and re.search(r"\bz\d+", addr.group(1)))
        if mnem.startswith(("ldff1", "ldnf1")):
            return "sve_first_fault"
        if mnem.startswith(("ld", "prf")) and addr:
            return "sve_gather" if vec_addr else "sve_contig_load"
        if mnem.startswith("st") and addr:
            return "sve_scatter" if vec_addr else "sve_contig_store"
        if mnem == "movprfx":
            return "sve_movprfx"
        if mnem in SVE_REDUCE:
            return "sve_reduce"
        if mnem == "setffr" or re.match(r"pn?\d+\b", ops):
            return "sve_pred"
        return "sve_other"
    op0 = (word >> 25) & 0xF
    if op0 in (0, 1, 3):  # reserved, SME: not classified
        return "scalar_other"
    memory = bool(re.search(r"\[(x\d+|sp)\b", ops)) or (
        mnem in ("ldr", "ldrsw", "prfm") and "[" not in ops)
    if memory:
        return "simd_ldst" if FPREG.match(ops) else "scalar_ldst"
    base = mnem.split(".")[0]
    if base in BRANCHES or (base in ("b", "bc") and "." in mnem):
        return "branch"
    if ANYFP.search(ops):
        return "simd"
    return "scalar_other"


def disasm_functions(exe, names):
    r = run([OBJDUMP, "-d", "--no-show-raw-insn", str(exe)])
    assert r.returncode == 0
    funcs, cur = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\S+)>:$", line)
        if m:
            cur = m[2] if m[2] in names else None
            if cur:
                funcs[cur] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if cur and m:
            funcs[cur].append((int(m[1], 16), m[2], m[3]))
    return funcs


def function_words(exe, name):
    """[(address, 32-bit word, mnemonic, operands)] of one function, from objdump."""
    r = run([OBJDUMP, "-d", f"--disassemble={name}", str(exe)])
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*(.*)$", line)
        if m:
            out.append((int(m[1], 16), int(m[2], 16), m[3], m[4]))
    assert out, f"{name}: not found in {exe}"
    return out


def branch_target(ops):
    m = re.search(r"\b([0-9a-f]+) <", ops)
    return int(m[1], 16) if m else None


def is_branch(mnem):
    return mnem.split(".")[0] in BRANCHES or mnem.startswith("b.")


