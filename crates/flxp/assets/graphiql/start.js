// Starts the vendored GraphiQL on POST /graphql. The token comes from the dashboard's login
// (sessionStorage of this tab) when there is one, else the user types it in the headers editor.
(function () {
  'use strict';
  var token = null;
  try { token = window.sessionStorage.getItem('flxp.token'); } catch (e) { /* storage off */ }
  var headers = JSON.stringify({ Authorization: 'Bearer ' + (token || '<your API token>') }, null, 2);
  var fetcher = GraphiQL.createFetcher({ url: '/graphql' });
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(React.createElement(GraphiQL, {
    fetcher: fetcher,
    defaultHeaders: headers,
    defaultQuery: '{ zones { name reachable simulated } role }\n',
    isHeadersEditorEnabled: true,
    // The token stays in this tab's memory: never written to localStorage.
    shouldPersistHeaders: false,
  }));
}());
