import { describe, expect, it } from 'vitest';
import { ConfigArgError, configPatch } from './config-args.ts';

describe('configPatch', () => {
  it('parses each --set value as JSON and makes each --unset null', () => {
    expect(configPatch(['keepCheckoutOnClose=true', 'allowedPaths=["src/**","docs/a=b.md"]', 'git={"authorName":"Ada"}'], ['forge'])).toEqual({
      keepCheckoutOnClose: true,
      allowedPaths: ['src/**', 'docs/a=b.md'],
      git: { authorName: 'Ada' },
      forge: null,
    });
    expect(configPatch([], [])).toEqual({});
  });

  it.each([
    [['keepCheckoutOnClose'], [], /expected key=<json>/],
    [['=true'], [], /expected key=<json>/],
    [['allowedPaths=src/**'], [], /the value is not JSON/],
    [['a.b=1'], [], /a key is a name/],
    [['forge={}'], ['forge'], /forge is given twice/],
    [[], ['__proto__'], /a key is a name/],
  ])('refuses %j %j with a message that names the problem', (sets, unsets, message) => {
    expect(() => configPatch(sets, unsets)).toThrow(ConfigArgError);
    expect(() => configPatch(sets, unsets)).toThrow(message);
  });
});
