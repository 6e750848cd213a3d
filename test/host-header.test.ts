import { describe, expect, it } from 'vitest'
import { isValidHostHeader } from '../src/host-header.js'

const oneLine = (value: string) => ['Host', value, 'Accept', '*/*']

describe('isValidHostHeader', () => {
  it('takes a name, an IPv4 or bracketed IPv6 address, each with or without a port, and an empty value', () => {
    for (const value of ['gateway.test', 'gateway.test:8080', '127.0.0.1:1', '[::1]', '[::1]:8080', 'xn--bcher-kva.example', '', 'a:']) {
      expect(isValidHostHeader(value, oneLine(value)), value).toBe(true)
    }
    expect(isValidHostHeader(undefined, [])).toBe(true)
  })

  it('refuses userinfo, paths, spaces, non-digit ports and bracket games', () => {
    for (const value of ['a b', 'user@host', 'a/b', 'a?b', 'a#b', 'host:80a', '[::1', '::1]', 'host:8080:1', 'é.example']) {
      expect(isValidHostHeader(value, oneLine(value)), value).toBe(false)
    }
  })

  it('refuses a second Host line, whatever the case of its name and its value', () => {
    expect(isValidHostHeader('a', ['Host', 'a', 'HOST', 'a'])).toBe(false)
    expect(isValidHostHeader('a', ['host', 'a', 'x-host', 'b', 'Hosts', 'c'])).toBe(true)
  })
})
