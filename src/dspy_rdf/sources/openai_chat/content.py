"""A request message's ``content`` -> model parts, as DSPy reads it: text, ``image_url``, ``input_audio``,
``file``, ``document`` and ``video`` blocks and DSPy 3.3 part dicts. A block's keys that the typed part
cannot hold are kept whole under ``part.metadata["legacy_content_block"]``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import fail, get_str, kind_of
from dspy_rdf.sources.dspy33 import part_from_json
from dspy_rdf.sources.openai_chat.values import guess_media_type, source_str, split_data_uri, text_value

__all__ = ["LEGACY_BLOCK_KEY", "coerce_part", "parts_from_openai_content"]

LEGACY_BLOCK_KEY = "legacy_content_block"
"""Part metadata key (DSPy's own) holding a request content block that the typed part cannot reproduce."""


def _with_block(part: m.LMPart, block: dict[str, Any], lossy: bool) -> m.LMPart:
    if lossy and LEGACY_BLOCK_KEY not in part.metadata:
        part.metadata = {**part.metadata, LEGACY_BLOCK_KEY: dict(block)}
    return part


def coerce_part(value: Any, path: str) -> m.LMPart:
    """DSPy's ``_coerce_part`` for JSON: a string is text, an object with ``type`` is a DSPy 3.3 part."""
    if isinstance(value, str):
        return m.LMTextPart(text=value)
    if isinstance(value, dict):
        if "type" not in value:
            raise fail(path, "a content block needs a type")
        return part_from_json(value, path)
    raise fail(path, f"expected a string or a content block, got {kind_of(value)}")


def parts_from_openai_content(content: Any, path: str) -> list[m.LMPart]:
    """An OpenAI message ``content`` (None, a string, a block or a list of blocks) -> parts, as DSPy reads it.

    Blocks: ``text``, ``image_url``, ``input_audio``, ``file``, ``document``, ``video``, and DSPy 3.3 part
    dicts (``{"type": "image", "url": ...}``); any other type is an error naming the field.
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [m.LMTextPart(text=content)]
    if not isinstance(content, list):
        return [coerce_part(content, path)]
    return [_content_block(item, f"{path}[{i}]") for i, item in enumerate(content)]


def _content_block(item: Any, path: str) -> m.LMPart:
    if not isinstance(item, dict):
        return coerce_part(item, path)
    kind = item.get("type")
    if kind == "text":
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise fail(f"{path}.metadata", f"expected a JSON object, got {kind_of(metadata)}")
        part: m.LMPart = m.LMTextPart(text=text_value(item.get("text", ""), f"{path}.text"), metadata=dict(metadata))
        return _with_block(part, item, bool(item.keys() - {"type", "text", "metadata"}))
    if kind == "image_url":
        image = item.get("image_url", {})
        if not isinstance(image, dict):
            raise fail(f"{path}.image_url", f"expected a JSON object, got {kind_of(image)}")
        if image.get("url") is None:
            raise fail(f"{path}.image_url.url", "is required")
        part = _image_from_source(image["url"], f"{path}.image_url.url")
        return _with_block(part, item, bool(item.keys() - {"type", "image_url"} or image.keys() - {"url"}))
    if kind == "input_audio":
        audio = item.get("input_audio", {})
        part, used = _audio_part(audio, f"{path}.input_audio")
        return _with_block(part, item, bool(item.keys() - {"type", "input_audio"} or audio.keys() - used))
    if kind == "file":
        file = item.get("file", {})
        part, used = _binary_part(file, f"{path}.file")
        return _with_block(part, item, bool(item.keys() - {"type", "file"} or file.keys() - used))
    if kind == "document":
        part, used = _document_part(item, path)
        return _with_block(part, item, bool(item.keys() - used))
    if kind == "video":
        video = item.get("video", {})
        part, used = _video_part(video, f"{path}.video")
        return _with_block(part, item, bool(item.keys() - {"type", "video"} or video.keys() - used))
    return coerce_part(item, path)


def _image_from_source(source: Any, path: str) -> m.LMImagePart:
    source = source_str(source, path)
    if source.startswith("data:"):
        media_type, data = split_data_uri(source)
        return m.LMImagePart(data=source_str(data, path), media_type=media_type)
    return m.LMImagePart(url=source, media_type=guess_media_type(source, "image/png"))


def _audio_part(audio: Any, path: str) -> tuple[m.LMAudioPart, set[str]]:
    if not isinstance(audio, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(audio)}")
    audio_format = audio.get("format") or "wav"
    if not isinstance(audio_format, str):
        raise fail(f"{path}.format", f"expected a string, got {kind_of(audio_format)}")
    media_type = audio_format if "/" in audio_format else f"audio/{audio_format}"
    for key in ("data", "url", "file_id", "path"):
        if audio.get(key) is None:
            continue
        value = source_str(audio[key], f"{path}.{key}")
        if key == "data" and value.startswith("data:"):
            # the data URI's media type wins, so a declared format is not used
            media_type, value = split_data_uri(value)
            return m.LMAudioPart(data=source_str(value, f"{path}.data"), media_type=media_type), {"data"}
        part = m.LMAudioPart(media_type=media_type)
        setattr(part, key, value)  # the one source given, by its name
        return part, {key, "format"}
    raise fail(path, "an input_audio block needs data, url, file_id or path")


def _binary_part(file: Any, path: str) -> tuple[m.LMBinaryPart, set[str]]:
    if not isinstance(file, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(file)}")
    filename = get_str(file, "filename", path)
    if file.get("file_data") is not None:
        file_data = source_str(file["file_data"], f"{path}.file_data")
        media_type, data = split_data_uri(file_data)
        part = m.LMBinaryPart(data=source_str(data, f"{path}.file_data"), media_type=media_type, filename=filename)
        # DSPy itself keeps the block when a part cannot hold it: file_data next to file_id, or file_data
        # that is no data URI (a URL), whose media type would otherwise be invented.
        if file.get("file_id") is not None or not file_data.startswith("data:"):
            part.metadata = {LEGACY_BLOCK_KEY: {"type": "file", "file": dict(file)}}
            return part, set(file)
        return part, {"file_data", "filename"}
    if file.get("data") is not None:
        media_type, data = split_data_uri(source_str(file["data"], f"{path}.data"))
        return m.LMBinaryPart(data=source_str(data, f"{path}.data"), media_type=media_type, filename=filename), {"data", "filename"}
    if file.get("file_id") is not None:
        return m.LMBinaryPart(file_id=source_str(file["file_id"], f"{path}.file_id"), filename=filename), {"file_id", "filename"}
    raise fail(path, "a file block needs file_data, data or file_id")


def _document_part(item: dict[str, Any], path: str) -> tuple[m.LMDocumentPart, set[str]]:
    title, context = get_str(item, "title", path), get_str(item, "context", path)
    used = {"type", "title", "context"}
    media_type = item.get("media_type") or "application/pdf"
    if not isinstance(media_type, str):
        raise fail(f"{path}.media_type", f"expected a string, got {kind_of(media_type)}")
    for key in ("data", "url", "file_id", "path"):
        if item.get(key) is not None:
            value = source_str(item[key], f"{path}.{key}")
            part = m.LMDocumentPart(media_type=media_type, title=title, context=context)
            setattr(part, key, value)  # the one source given, by its name
            return part, used | {key, "media_type"}
    source = item.get("source")
    if isinstance(source, dict):
        if not source:
            raise fail(f"{path}.source", "must be non-empty")
        citations = item.get("citations") or {}
        if not isinstance(citations, dict):
            raise fail(f"{path}.citations", f"expected a JSON object, got {kind_of(citations)}")
        return m.LMDocumentPart(source=source, citations=citations, title=title, context=context), used | {"source", "citations"}
    if isinstance(source, str):
        source = source_str(source, f"{path}.source")
        if source.startswith("data:"):
            media, data = split_data_uri(source)
            part = m.LMDocumentPart(data=source_str(data, f"{path}.source"), media_type=media, title=title, context=context)
        elif urlparse(source).scheme in {"http", "https"}:
            part = m.LMDocumentPart(url=source, media_type=guess_media_type(source, media_type), title=title, context=context)
        else:
            part = m.LMDocumentPart(file_id=source, media_type=media_type, title=title, context=context)
        used.add("source")
        if item.get("media_type") in (None, part.media_type):
            used.add("media_type")  # a declared media type that the data URI or URL overrode is lost
        return part, used
    if source is not None:
        raise fail(f"{path}.source", f"expected a string or a JSON object, got {kind_of(source)}")
    raise fail(path, "a document block needs a source (or data, url, file_id or path)")


def _video_part(video: Any, path: str) -> tuple[m.LMVideoPart, set[str]]:
    if not isinstance(video, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(video)}")
    media_type = video.get("media_type") or "video/mp4"
    if not isinstance(media_type, str):
        raise fail(f"{path}.media_type", f"expected a string, got {kind_of(media_type)}")
    for key in ("data", "url", "file_id", "path"):
        if video.get(key) is None:
            continue
        value = source_str(video[key], f"{path}.{key}")
        if key == "data" and value.startswith("data:"):
            media, value = split_data_uri(value)
            used = {"data", "media_type"} if video.get("media_type") in (None, media) else {"data"}
            return m.LMVideoPart(data=source_str(value, f"{path}.data"), media_type=media), used
        part = m.LMVideoPart(media_type=media_type)
        setattr(part, key, value)  # the one source given, by its name
        return part, {key, "media_type"}
    raise fail(path, "a video block needs data, url, file_id or path")
