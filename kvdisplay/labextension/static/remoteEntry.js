/* kv-course-alt-text: JupyterLab puts an image output's alt text on the <img> it draws.
 *
 * A figure kvdisplay shows carries its alt text in the output's metadata, {"image/png": {"alt": "..."}}:
 * nbconvert's HTML templates read that key (templates/classic/base.html.j2, get_metadata('alt', 'image/png')),
 * but JupyterLab 4.6's image renderer reads only width, height, unconfined and needs_background from it
 * (@jupyterlab/rendermime: RenderedImage.render, renderers.renderImage), so its <img> has no alt at all.
 * This plugin wraps the image renderer factory: the same renderer, then the <img>'s alt set from that key.
 *
 * Written by hand, no build step: a JupyterLab prebuilt extension is a module federation container,
 * window._JUPYTERLAB[name] = {init(shareScope), get(module)} (@jupyterlab/application-top's bootstrap.js
 * loads this file and calls init, then get('./extension')); the plugin's token, IRenderMimeRegistry, comes
 * from the share scope JupyterLab passes to init, so it is the very token its own plugins provide.
 * tests/browser/test_lab.py reads the <img alt> of a chapter's plot in JupyterLab.
 */
var _JUPYTERLAB;
(function () {
  'use strict';
  var NAME = 'kv-course-alt-text';
  var CORE = '@jupyterlab/application-top';
  var scope = null;

  function sharedModule(name) {
    var versions = (scope && scope[name]) || {};
    var entries = Object.keys(versions).map(function (version) { return versions[version]; });
    // JupyterLab's own copy first (a singleton: its plugins hold the same tokens), then one already loaded
    entries.sort(function (a, b) {
      return (b.from === CORE) - (a.from === CORE) || (!!b.loaded) - (!!a.loaded);
    });
    if (!entries.length) {
      return Promise.reject(new Error(NAME + ': JupyterLab shares no ' + name));
    }
    var entry = entries[0];
    var factory = typeof entry.lib === 'function' ? entry.lib : entry.get();
    return Promise.resolve(factory).then(function (make) { return make(); });
  }

  function withAlt(factory) {
    return {
      safe: factory.safe,
      mimeTypes: factory.mimeTypes,
      defaultRank: factory.defaultRank,
      createRenderer: function (options) {
        var renderer = factory.createRenderer(options);
        var render = renderer.render.bind(renderer);
        renderer.render = function (model) {
          return Promise.resolve(render(model)).then(function () {
            var metadata = model.metadata[options.mimeType];
            var alt = metadata && typeof metadata.alt === 'string' ? metadata.alt : null;
            var image = renderer.node.querySelector('img');
            if (image && alt !== null) {
              image.alt = alt;
            }
          });
        };
        return renderer;
      }
    };
  }

  function plugin(rendermime) {
    return {
      id: NAME + ':plugin',
      description: "Puts an image output's alt text (metadata[mimeType].alt) on the <img> JupyterLab draws.",
      autoStart: true,
      requires: [rendermime.IRenderMimeRegistry],
      activate: function (app, registry) {
        var wrapped = [];
        registry.mimeTypes.forEach(function (mimeType) {
          var factory = registry.getFactory(mimeType);
          if (mimeType.indexOf('image/') === 0 && mimeType !== 'image/svg+xml' && factory &&
              wrapped.indexOf(factory) < 0) {
            var withAltText = withAlt(factory);
            wrapped.push(factory, withAltText);     // each factory once (one serves several image types)
            registry.addFactory(withAltText, registry.getRank(mimeType));
          }
        });
      }
    };
  }

  var container = {
    init: function (shareScope) {
      scope = shareScope;
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ': no module ' + module));
      }
      return sharedModule('@jupyterlab/rendermime').then(function (rendermime) {
        return function () { return { __esModule: true, default: plugin(rendermime) }; };
      });
    }
  };
  _JUPYTERLAB = _JUPYTERLAB || {};
  _JUPYTERLAB[NAME] = container;
})();
