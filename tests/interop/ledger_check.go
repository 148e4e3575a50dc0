// ledger_check checks a provrun ledger with a second implementation: Go's
// golang.org/x/mod/sumdb/note (signed notes) and golang.org/x/mod/sumdb/tlog (RFC 6962
// trees, tiles and proofs), as Debian packages them (golang-golang-x-mod-dev). Built
// offline in GOPATH mode by the ledger tests:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o ledger_check ledger_check.go
//
// Commands (each prints what it checked and exits 0, or prints why not and exits 1):
//
//	checkpoint VKEY CHECKPOINT        the signed checkpoint: prints "SIZE ROOT"
//	proofs VKEY CHECKPOINT FILE       every line of FILE a JSON inclusion proof
//	                                  {"index","tree_size","hashes","leaf"} (leaf: base64
//	                                  of the entry), checked with tlog.CheckRecord
//	consistency VKEY OLD NEW FILE     FILE's {"hashes"} proves OLD's tree a prefix of
//	                                  NEW's (tlog.CheckTree)
//	tiles VKEY DIR                    the ledger's tiles read through tlog.TileHashReader
//	                                  (which authenticates each tile against the signed
//	                                  root), the tree hash recomputed, and every Nth entry
//	                                  of the entry bundles proved in the tree
//	cosigned WVKEY CHECKPOINT         a witness's cosignature on the checkpoint, by the
//	                                  C2SP tlog-cosignature spec alone (crypto/ed25519, no
//	                                  provrun code): the witness key NAME+HASH+BASE64 with
//	                                  type 0x04, the line's key id, a timestamp, and the
//	                                  signature over "cosignature/v1\ntime T\n" and the
//	                                  note's text; prints the time
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

// checkpoint opens a signed C2SP checkpoint with the verifier key and parses its text:
// origin (the key's name), size, base64 root.
func checkpoint(vkey, path string) (int64, tlog.Hash) {
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("note: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		fail("checkpoint text is not origin, size, root")
	}
	if lines[0] != verifier.Name() {
		fail("origin %q is not the key name %q", lines[0], verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		fail("size %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		fail("root %q", lines[2])
	}
	var h tlog.Hash
	copy(h[:], root)
	return size, h
}

func hashes(text []string) []tlog.Hash {
	out := make([]tlog.Hash, len(text))
	for i, t := range text {
		b, err := base64.StdEncoding.DecodeString(t)
		if err != nil || len(b) != tlog.HashSize {
			fail("hash %q", t)
		}
		copy(out[i][:], b)
	}
	return out
}

type inclusion struct {
	Index    int64    `json:"index"`
	TreeSize int64    `json:"tree_size"`
	Hashes   []string `json:"hashes"`
	Leaf     string   `json:"leaf"`
}

func proofs(vkey, cp, file string) {
	size, root := checkpoint(vkey, cp)
	f, err := os.Open(file)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	scan := bufio.NewScanner(f)
	scan.Buffer(make([]byte, 1<<20), 1<<20)
	count := 0
	for scan.Scan() {
		var p inclusion
		if err := json.Unmarshal(scan.Bytes(), &p); err != nil {
			fail("proof line %d: %v", count+1, err)
		}
		if p.TreeSize != size {
			fail("proof %d is for a tree of %d, the checkpoint has %d", count+1, p.TreeSize, size)
		}
		leaf, err := base64.StdEncoding.DecodeString(p.Leaf)
		if err != nil {
			fail("leaf: %v", err)
		}
		if err := tlog.CheckRecord(tlog.RecordProof(hashes(p.Hashes)), size, root, p.Index, tlog.RecordHash(leaf)); err != nil {
			fail("inclusion of %d in %d: %v", p.Index, size, err)
		}
		count++
	}
	fmt.Printf("OK %d inclusion proof(s) in a tree of %d\n", count, size)
}

func consistency(vkey, old, new, file string) {
	n, oldRoot := checkpoint(vkey, old)
	t, newRoot := checkpoint(vkey, new)
	raw, err := os.ReadFile(file)
	if err != nil {
		fail("%v", err)
	}
	var p struct {
		Hashes []string `json:"hashes"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		fail("%v", err)
	}
	if err := tlog.CheckTree(tlog.TreeProof(hashes(p.Hashes)), t, newRoot, n, oldRoot); err != nil {
		fail("consistency of %d with %d: %v", n, t, err)
	}
	fmt.Printf("OK the tree of %d is a prefix of the tree of %d\n", n, t)
}

// tileFiles reads the C2SP layout: tlog's own tile paths carry the height
// ("tile/8/L/..."), C2SP's do not ("tile/L/...").
type tileFiles struct{ dir string }

func (r tileFiles) Height() int { return 8 }

func (r tileFiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		p := strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		b, err := os.ReadFile(filepath.Join(r.dir, p))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (r tileFiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

// entries reads the entry bundle holding leaf i of a tree of size n.
func entries(dir string, i, n int64) [][]byte {
	index := i / 256
	w := 256
	if (index+1)*256 > n {
		w = int(n - index*256)
	}
	t := tlog.Tile{H: 8, L: 0, N: index, W: w}
	p := strings.Replace(t.Path(), "tile/8/0/", "tile/entries/", 1)
	raw, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		fail("%v", err)
	}
	var out [][]byte
	for len(raw) > 0 {
		if len(raw) < 2 {
			fail("%s: torn length", p)
		}
		l := int(binary.BigEndian.Uint16(raw))
		if len(raw) < 2+l {
			fail("%s: torn entry", p)
		}
		out = append(out, raw[2:2+l])
		raw = raw[2+l:]
	}
	if len(out) != w {
		fail("%s holds %d entries, not %d", p, len(out), w)
	}
	return out
}

func tiles(vkey, dir string) {
	size, root := checkpoint(vkey, filepath.Join(dir, "checkpoint"))
	if size == 0 {
		fmt.Println("OK an empty tree")
		return
	}
	reader := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, tileFiles{dir})
	h, err := tlog.TreeHash(size, reader)
	if err != nil || h != root {
		fail("tree hash from the tiles: %v", err)
	}
	step := size/300 + 1
	checked := 0
	for i := int64(0); i < size; i += step {
		checkLeaf(dir, reader, size, root, i)
		checked++
	}
	checkLeaf(dir, reader, size, root, size-1)
	fmt.Printf("OK the tiles of a tree of %d, %d leaves proved\n", size, checked+1)
}

func checkLeaf(dir string, reader tlog.HashReader, size int64, root tlog.Hash, i int64) {
	leaf := entries(dir, i, size)[i%256]
	if !bytes.HasPrefix(leaf, []byte("sha256:")) || len(leaf) != 72 || leaf[71] != '\n' {
		fail("leaf %d is not a statement line", i)
	}
	p, err := tlog.ProveRecord(size, i, reader)
	if err != nil {
		fail("prove %d: %v", i, err)
	}
	if err := tlog.CheckRecord(p, size, root, i, tlog.RecordHash(leaf)); err != nil {
		fail("leaf %d: %v", i, err)
	}
}

// cosigned checks a cosignature/v1 line on a checkpoint against a witness's key.
func cosigned(wvkey, path string) {
	parts := strings.SplitN(strings.TrimSpace(wvkey), "+", 3)
	if len(parts) != 3 {
		fail("witness key: not NAME+HASH+KEY")
	}
	name := parts[0]
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		fail("witness key: not type 0x04 and a 32-byte Ed25519 key")
	}
	pub := ed25519.PublicKey(raw[1:])
	h := sha256.Sum256(append(append([]byte(name+"\n"), 0x04), pub...))
	if fmt.Sprintf("%08x", binary.BigEndian.Uint32(h[:4])) != parts[1] {
		fail("witness key: the key hash does not match")
	}
	note, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	split := bytes.LastIndex(note, []byte("\n\n"))
	if split < 0 {
		fail("no blank line in the note")
	}
	body := note[:split+1]
	for _, line := range strings.Split(string(note[split+2:]), "\n") {
		prefix := "\u2014 " + name + " "
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, prefix))
		if err != nil || len(sig) != 4+8+64 || !bytes.Equal(sig[:4], h[:4]) {
			continue
		}
		t := binary.BigEndian.Uint64(sig[4:12])
		msg := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), body...)
		if !ed25519.Verify(pub, msg, sig[12:]) {
			fail("the cosignature by %s does not verify", name)
		}
		fmt.Printf("%d\n", t)
		return
	}
	fail("no cosignature by %s", name)
}

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 3 && args[0] == "checkpoint":
		size, root := checkpoint(args[1], args[2])
		fmt.Printf("%d %s\n", size, base64.StdEncoding.EncodeToString(root[:]))
	case len(args) == 4 && args[0] == "proofs":
		proofs(args[1], args[2], args[3])
	case len(args) == 5 && args[0] == "consistency":
		consistency(args[1], args[2], args[3], args[4])
	case len(args) == 3 && args[0] == "tiles":
		tiles(args[1], args[2])
	case len(args) == 3 && args[0] == "cosigned":
		cosigned(args[1], args[2])
	default:
		fail("usage: ledger_check checkpoint|proofs|consistency|tiles|cosigned ...")
	}
}
