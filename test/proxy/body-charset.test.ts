/** Which encodings an answer body is searched in for the gateway's credential (pure). */
import { describe, expect, it } from 'vitest'
import { declaredCharset, searchEncodings } from '../../src/proxy/body-charset.js'

const json = Buffer.from('{"a":1}')
const le = Buffer.from('{"a":1}', 'utf16le')
const be = Buffer.from('{"a":1}', 'utf16le').swap16()

describe('declaredCharset', () => {
  it.each([
    ['application/json; charset=UTF-8', 'utf-8'],
    ['text/plain;charset="utf-16le"', 'utf-16le'],
    ['application/json ; CHARSET = IBM1047', 'ibm1047'],
    ['application/json', undefined],
    [undefined, undefined],
  ])('%s → %s', (type, charset) => {
    expect(declaredCharset(type)).toBe(charset)
  })
})

describe('searchEncodings', () => {
  // Diff review, session 27: common labels of ASCII supersets dropped legitimate bodies.
  it.each([
    ['utf-8', 'UTF8', 'utf_8', 'unicode-1-1-utf-8', 'us-ascii', 'ANSI_X3.4-1968'],
    ['iso-8859-15', 'ISO_8859-1:1987', 'iso-8859-8-i', 'latin1', 'l2', 'csisolatin1', 'iso-ir-100'],
    ['windows-1252', 'x-cp1252', 'windows-874', 'cp850', 'ibm437', 'ibm866', 'cp932', 'cp936', 'cp949', 'dos-874'],
    ['shift_jis', 'ms932', 'x-sjis', 'csshiftjis', 'x-euc-jp', 'iso-2022-jp', 'euc-kr', 'ks_c_5601-1987', 'cseuckr', 'gb18030', 'gbk', 'big5', 'koi8-r', 'macintosh'],
    // WHATWG labels a second diff review found refused.
    ['greek', 'cyrillic', 'arabic', 'hebrew', 'logical', 'visual', 'cp819', 'ibm819', 'koi', 'cskoi8r', 'asmo-708', 'x-user-defined'],
  ].flat())('%s, an ASCII superset: the UTF-8 bytes', (charset) => {
    expect(searchEncodings(`application/json; charset=${charset}`, json)).toEqual(['utf8'])
  })

  it('UTF-16 by its declared byte order, or by the body’s when the charset does not say', () => {
    expect(searchEncodings('application/json; charset=utf-16le', le)).toEqual(['utf8', 'utf16le'])
    expect(searchEncodings('application/json; charset=UTF-16BE', be)).toEqual(['utf8', 'utf16be'])
    expect(searchEncodings('application/json; charset=utf-16', Buffer.concat([Buffer.from([0xff, 0xfe]), le]))).toEqual(['utf8', 'utf16le'])
    expect(searchEncodings('application/json; charset=utf-16', be)).toEqual(['utf8', 'utf16be'])
    expect(searchEncodings('application/json; charset=utf-16', Buffer.from([0x20, 0x20]))).toEqual(['utf8', 'utf16be', 'utf16le'])
    expect(searchEncodings('text/html; charset=unicode', le)).toEqual(['utf8', 'utf16le'])
    expect(searchEncodings('text/html; charset=unicodeFFFE', be)).toEqual(['utf8', 'utf16be'])
  })

  // Regression (diff review, session 27): only a few names were known unsearchable, and IBM1047, IBM500,
  // cp1140 (EBCDIC), csUTF32 and an undeclared UTF-32 body with a BOM went on unredacted.
  it.each(['utf-32', 'csUTF32', 'UTF-32LE', 'utf-7', 'IBM1047', 'IBM500', 'cp1140', 'cp037', 'ibm-1047', 'cp875', 'ebcdic-us', 'hz-gb-2312', 'iso-2022-kr', 'x-unknown'])('%s: not searchable', (charset) => {
    expect(searchEncodings(`application/json; charset=${charset}`, json)).toBeNull()
  })

  it('no charset: UTF-8, unless the first bytes say UTF-16 or UTF-32', () => {
    expect(searchEncodings('application/json', json)).toEqual(['utf8'])
    expect(searchEncodings(undefined, le)).toEqual(['utf8', 'utf16le'])
    expect(searchEncodings(undefined, be)).toEqual(['utf8', 'utf16be'])
    expect(searchEncodings(undefined, Buffer.from([0x00, 0x00, 0xfe, 0xff, 0, 0, 0, 0x7b]))).toBeNull()
    expect(searchEncodings(undefined, Buffer.from([0x7b, 0, 0, 0]))).toBeNull()
    // A body of NULs is binary, not text in any of these: searched as bytes, quickly.
    expect(searchEncodings(undefined, Buffer.alloc(64))).toEqual(['utf8'])
  })
})
