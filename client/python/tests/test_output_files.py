"""Result.files: the files a snippet leaves in $KOTOBA_OUTPUT_DIR, through
a real broker; OutputFile's name rule, type by magic bytes, and save()."""
import os

import pytest

import kotoba_broker
from kotoba_broker import ONCE, OutputFile, ProtocolError, mime_type_of

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5f6a3a60000000049454e44ae426082")
WRITE_PNG = ("import os\n"
             "with open(os.path.join(os.environ['KOTOBA_OUTPUT_DIR'], 'plot.png'), 'wb') as f:\n"
             "    f.write(bytes.fromhex(%r))\n" % PNG.hex())


def test_png_in_result(broker_proc):
    with kotoba_broker.Broker(broker_proc.socket) as c:
        r = c.run(WRITE_PNG, cwd=broker_proc.dir, on_card=lambda card: ONCE)
    assert r.ok, r
    assert [(f.name, f.data, f.mime_type, f.size) for f in r.files] == \
        [("plot.png", PNG, "image/png", len(PNG))]
    assert r.files_left_out == 0


def test_no_files_no_field(broker_proc):
    with kotoba_broker.Broker(broker_proc.socket, channel=False) as c:
        r = c.run("print(1)", cwd=broker_proc.dir)
    assert r.files == () and r.files_left_out == 0


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "a\nb", "a\x1bb", "x" * 256])
def test_hostile_names_refused(name):
    with pytest.raises(ProtocolError):
        OutputFile.from_frame({"type": "file", "id": 1, "name": name, "data": b"x"})


def test_save_never_overwrites_or_follows(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "plot.png").symlink_to(target)
    f = OutputFile("plot.png", PNG)
    with pytest.raises(FileExistsError):
        f.save(str(tmp_path))
    assert target.read_bytes() == b"keep"
    os.unlink(tmp_path / "plot.png")
    assert f.save(str(tmp_path)) == str(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes() == PNG


@pytest.mark.parametrize("data,mime", [
    (PNG, "image/png"), (b"\xff\xd8\xff\xe0rest", "image/jpeg"), (b"GIF89a..", "image/gif"),
    (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"), (b"<svg xmlns='x'/>", "image/svg+xml"),
    (b'<?xml version="1.0"?>\n<!-- c -->\n<svg/>', "image/svg+xml"),
    (b'<?xml version="1.0"?><html/>', "application/octet-stream"),
    (b"plain text", "application/octet-stream")])
def test_mime_by_magic(data, mime):
    assert mime_type_of(data) == mime
